package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TokenPrefix starts every token, so that leaked tokens are easy to find
// (secret scanners) and easy to tell from other strings.
const TokenPrefix = "gdv_"

// Kind says what a token may do.
type Kind string

// Token kinds: a user token calls the user API as its user; an agent
// token (an enrolment token) only enrols nodes (its label "agents": any
// name; another label: the node of that name), a limited number of times
// (Uses) before it expires (Expires), and a node credential, which
// enrolment returns, calls the agent API (register, poll, report, leave)
// for its node only.
const (
	KindUser  Kind = "user"
	KindAgent Kind = "agent"
	KindNode  Kind = "node"
)

// AnyNode is the label of an agent token that may enrol any node name
// (the bootstrap agent.token).
const AnyNode = "agents"

// User is an account jobs are charged to.
type User struct {
	Name    string    `json:"name"`
	Admin   bool      `json:"admin"`
	Created time.Time `json:"created"`
}

// Token is a token's record; the secret itself is never stored, only its
// SHA-256 hash (the record's key).
type Token struct {
	// ID is the first 12 hex digits of the hash: enough to name a token
	// (to revoke it), useless to authenticate.
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Kind    Kind      `json:"kind"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
	// Uses (agent tokens) is how many more nodes the token may enrol; the
	// record is deleted when its last use is spent. 0 is a record written
	// before enrolment tokens were limited (unlimited, as they were then).
	Uses int `json:"uses,omitempty"`
	// Expires (agent tokens): the token authenticates nothing from then
	// on. Zero is a record written before enrolment tokens expired (never).
	Expires time.Time `json:"expires,omitzero"`
}

// Legacy reports whether t is an agent token written before enrolment
// tokens were limited: it enrols any number of nodes and never expires
// (a store of the previous release keeps working; admins are told to
// revoke it).
func (t Token) Legacy() bool { return t.Kind == KindAgent && t.Uses == 0 && t.Expires.IsZero() }

// EnrolOptions are an agent (enrolment) token's limits.
type EnrolOptions struct {
	// Label is the one node name the token enrols, or AnyNode.
	Label string
	// Uses is how many nodes it may enrol (at least 1).
	Uses int
	// TTL is how long it may be used (more than 0).
	TTL time.Duration
}

// Limits of enrolment tokens.
const (
	MaxEnrolUses = 10000
	MaxEnrolTTL  = 365 * 24 * time.Hour
)

// Check checks the options and names the one at fault.
func (o EnrolOptions) Check() error {
	switch {
	case o.Label != AnyNode && !nodeNameRE.MatchString(o.Label):
		return fmt.Errorf("label %q: want a node name (letters, digits, '.', '_', '-', at most 253) or %q for any", o.Label, AnyNode)
	case o.Uses < 1 || o.Uses > MaxEnrolUses:
		return fmt.Errorf("uses: an enrolment token enrols 1 to %d nodes, got %d", MaxEnrolUses, o.Uses)
	case o.TTL <= 0 || o.TTL > MaxEnrolTTL:
		return fmt.Errorf("ttl: an enrolment token lasts more than 0 and at most %s, got %s", MaxEnrolTTL, o.TTL)
	}
	return nil
}

// Principal is who made an authenticated call.
type Principal struct {
	User  string
	Admin bool
	// Agent: an agent token or a node credential; Node is the node a node
	// credential is bound to ("" for an agent token).
	Agent   bool
	Node    string
	TokenID string
}

// ErrNoToken is returned by RevokeToken for an ID no token has.
var ErrNoToken = errors.New("no such token")

// ErrNodeEnrolled is returned by EnrolNode for a name that has a
// credential already.
var ErrNodeEnrolled = errors.New("node is enrolled already")

// ErrEnrolToken is returned by EnrolNode when the agent token it is given
// is gone (revoked, or its last use spent), has expired, or is not an
// agent token.
var ErrEnrolToken = errors.New("the agent token is revoked, used up or expired")

// ErrUnauthenticated is returned by Authenticate for a missing, malformed,
// unknown or revoked token.
var ErrUnauthenticated = errors.New("invalid or missing token")

var userRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// nodeNameRE is the API's node name (api.validNodeName).
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// ValidUserName checks a user name: 1 to 63 of a-z, 0-9, '.', '_', '-',
// starting with a letter or digit.
func ValidUserName(name string) error {
	if !userRE.MatchString(name) {
		return fmt.Errorf("user name %q: want 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit", name)
	}
	return nil
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	out := make([]byte, hex.EncodedLen(len(h)))
	hex.Encode(out, h[:])
	return out
}

func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// CreateUser creates a user, or updates its admin flag if it exists.
func (db *DB) CreateUser(name string, admin bool, now time.Time) error {
	if err := ValidUserName(name); err != nil {
		return err
	}
	return db.b.Update(func(tx *bolt.Tx) error {
		ub := tx.Bucket(bUsers)
		u := User{Name: name, Admin: admin, Created: now.UTC()}
		if v := ub.Get([]byte(name)); v != nil {
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("user %s: %w", name, err)
			}
			u.Admin = admin
		}
		return putJSON(ub, name, u)
	})
}

// CreateToken makes a new user token for user (created if absent) and
// returns its secret, which is shown once and never stored. admin makes
// the user an administrator.
func (db *DB) CreateToken(user string, kind Kind, admin bool, label string, now time.Time) (string, Token, error) {
	switch kind {
	case KindUser:
		if err := ValidUserName(user); err != nil {
			return "", Token{}, err
		}
	default:
		return "", Token{}, fmt.Errorf("token kind %q: want user (agent tokens come from CreateEnrolToken, node credentials from EnrolNode)", kind)
	}
	secret, err := newSecret()
	if err != nil {
		return "", Token{}, fmt.Errorf("token: %w", err)
	}
	h := hashToken(secret)
	t := Token{ID: string(h[:12]), User: user, Kind: kind, Label: label, Created: now.UTC()}
	err = db.b.Update(func(tx *bolt.Tx) error {
		{
			ub := tx.Bucket(bUsers)
			u := User{Name: user, Admin: admin, Created: now.UTC()}
			if v := ub.Get([]byte(user)); v != nil {
				if err := json.Unmarshal(v, &u); err != nil {
					return fmt.Errorf("user %s: %w", user, err)
				}
				u.Admin = u.Admin || admin
			}
			if err := putJSON(ub, user, u); err != nil {
				return err
			}
		}
		return putJSON(tx.Bucket(bTokens), string(h), t)
	})
	if err != nil {
		return "", Token{}, fmt.Errorf("store: create token: %w", err)
	}
	return secret, t, nil
}

// CreateEnrolToken makes an agent token that enrols o.Uses nodes (any
// name, or only o.Label's) until now+o.TTL, and returns its secret, which
// is shown once and never stored. Expired tokens are deleted on the way.
func (db *DB) CreateEnrolToken(o EnrolOptions, now time.Time) (string, Token, error) {
	if o.Label == "" {
		o.Label = AnyNode
	}
	if err := o.Check(); err != nil {
		return "", Token{}, fmt.Errorf("agent token: %w", err)
	}
	secret, err := newSecret()
	if err != nil {
		return "", Token{}, fmt.Errorf("token: %w", err)
	}
	h := hashToken(secret)
	t := Token{ID: string(h[:12]), User: "agent:" + o.Label, Kind: KindAgent, Label: o.Label, Created: now.UTC(),
		Uses: o.Uses, Expires: now.Add(o.TTL).UTC()}
	err = db.b.Update(func(tx *bolt.Tx) error {
		if err := pruneExpired(tx.Bucket(bTokens), now); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bTokens), string(h), t)
	})
	if err != nil {
		return "", Token{}, fmt.Errorf("store: create agent token: %w", err)
	}
	return secret, t, nil
}

// pruneExpired deletes the expired agent tokens of b.
func pruneExpired(b *bolt.Bucket, now time.Time) error {
	_, err := deleteTokens(b, func(o Token) bool {
		return o.Kind == KindAgent && !o.Expires.IsZero() && !now.Before(o.Expires)
	})
	return err
}

// deleteTokens deletes the token records of b for which match is true and
// returns them, in key order.
func deleteTokens(b *bolt.Bucket, match func(Token) bool) ([]Token, error) {
	var keys [][]byte
	var gone []Token
	err := b.ForEach(func(k, v []byte) error {
		var o Token
		if err := json.Unmarshal(v, &o); err != nil {
			return fmt.Errorf("token %.12s: %w", k, err)
		}
		if match(o) {
			keys = append(keys, append([]byte(nil), k...))
			gone = append(gone, o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// EnrolNode makes the credential of node name with the agent token whose
// ID is via, and returns its secret, which is shown once and never
// stored. In one transaction: the token must still be there and unexpired
// (ErrEnrolToken), the name must have no credential (ErrNodeEnrolled: a
// name is taken over only after RevokeNode), and one of the token's uses
// is spent (its record deleted with its last), so that two enrolments at
// once never spend one use twice.
func (db *DB) EnrolNode(name, via string, now time.Time) (string, Token, error) {
	secret, err := newSecret()
	if err != nil {
		return "", Token{}, fmt.Errorf("token: %w", err)
	}
	h := hashToken(secret)
	t := Token{ID: string(h[:12]), User: "node:" + name, Kind: KindNode, Label: name, Created: now.UTC()}
	err = db.b.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bTokens)
		var viaKey []byte
		var agent Token
		taken := false
		err := b.ForEach(func(k, v []byte) error {
			var o Token
			if err := json.Unmarshal(v, &o); err != nil {
				return fmt.Errorf("token %.12s: %w", k, err)
			}
			taken = taken || (o.Kind == KindNode && o.Label == name)
			if via != "" && o.ID == via && o.Kind == KindAgent {
				viaKey, agent = append([]byte(nil), k...), o
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case viaKey == nil || (!agent.Expires.IsZero() && !now.Before(agent.Expires)):
			return fmt.Errorf("agent token %s: %w", via, ErrEnrolToken)
		case agent.Label != AnyNode && agent.Label != name:
			return fmt.Errorf("agent token %s enrols node %q only, not %q: %w", via, agent.Label, name, ErrEnrolToken)
		case taken:
			return fmt.Errorf("node %s: %w", name, ErrNodeEnrolled)
		}
		switch {
		case agent.Uses == 1:
			err = b.Delete(viaKey)
		case agent.Uses > 1:
			agent.Uses--
			err = putJSON(b, string(viaKey), agent)
		}
		if err != nil {
			return err
		}
		return putJSON(b, string(h), t)
	})
	if err != nil {
		return "", Token{}, fmt.Errorf("store: enrol: %w", err)
	}
	return secret, t, nil
}

// RevokeNode deletes every credential of node name and returns their
// records (none: the name was not enrolled).
func (db *DB) RevokeNode(name string) ([]Token, error) {
	var gone []Token
	err := db.b.Update(func(tx *bolt.Tx) error {
		var err error
		gone, err = deleteTokens(tx.Bucket(bTokens), func(o Token) bool { return o.Kind == KindNode && o.Label == name })
		return err
	})
	return gone, err
}

// Authenticate resolves a token's secret to its principal, now.
func (db *DB) Authenticate(secret string) (Principal, error) {
	return db.AuthenticateAt(secret, time.Now())
}

// AuthenticateAt resolves a token's secret to its principal at time now:
// an agent token that has expired by then is ErrUnauthenticated.
func (db *DB) AuthenticateAt(secret string, now time.Time) (Principal, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 200 {
		return Principal{}, ErrUnauthenticated
	}
	h := hashToken(secret)
	var p Principal
	err := db.b.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bTokens).Get(h)
		if v == nil {
			return ErrUnauthenticated
		}
		var t Token
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("token %s: %w", h[:12], err)
		}
		if t.Kind == KindAgent && !t.Expires.IsZero() && !now.Before(t.Expires) {
			return ErrUnauthenticated
		}
		p = Principal{User: t.User, Agent: t.Kind == KindAgent || t.Kind == KindNode, TokenID: t.ID}
		if t.Kind == KindNode {
			p.Node = t.Label
		}
		if t.Kind == KindUser {
			uv := tx.Bucket(bUsers).Get([]byte(t.User))
			if uv == nil {
				return ErrUnauthenticated // user deleted
			}
			var u User
			if err := json.Unmarshal(uv, &u); err != nil {
				return fmt.Errorf("user %s: %w", t.User, err)
			}
			p.Admin = u.Admin
		}
		return nil
	})
	if err != nil {
		return Principal{}, err
	}
	return p, nil
}

// Tokens lists token records (never secrets), by user then ID; user ""
// lists every token.
func (db *DB) Tokens(user string) ([]Token, error) {
	var out []Token
	err := db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bTokens).ForEach(func(_, v []byte) error {
			var t Token
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			if user == "" || t.User == user {
				out = append(out, t)
			}
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// RevokeToken deletes the token whose ID (or a unique prefix of at least 6
// hex digits) is given, and returns its record.
func (db *DB) RevokeToken(id string) (Token, error) {
	var gone Token
	err := db.b.Update(func(tx *bolt.Tx) error {
		if len(id) < 6 {
			return fmt.Errorf("token id %q: give at least 6 hex digits", id)
		}
		c := tx.Bucket(bTokens).Cursor()
		var match []byte
		for k, v := c.Seek([]byte(id)); k != nil && strings.HasPrefix(string(k), id); k, v = c.Next() {
			if match != nil {
				return fmt.Errorf("token id %q is ambiguous", id)
			}
			match = append([]byte(nil), k...)
			if err := json.Unmarshal(v, &gone); err != nil {
				return err
			}
		}
		if match == nil {
			return fmt.Errorf("token id %q: %w", id, ErrNoToken)
		}
		return tx.Bucket(bTokens).Delete(match)
	})
	return gone, err
}

// Users lists users by name.
func (db *DB) Users() ([]User, error) {
	var out []User
	err := db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bUsers).ForEach(func(_, v []byte) error {
			var u User
			if err := json.Unmarshal(v, &u); err != nil {
				return err
			}
			out = append(out, u)
			return nil
		})
	})
	return out, err
}

// HasUsers reports whether any user exists (false on a new store).
func (db *DB) HasUsers() (bool, error) {
	has := false
	err := db.b.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bUsers).Cursor().First()
		has = k != nil
		return nil
	})
	return has, err
}

func putJSON(b *bolt.Bucket, k string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(k), data)
}
