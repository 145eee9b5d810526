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
// token only enrols nodes (its label "agents": any name; another label:
// the node of that name), and a node credential, which enrolment returns,
// calls the agent API (register, poll, report, leave) for its node only.
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

// ErrUnauthenticated is returned by Authenticate for a missing, malformed,
// unknown or revoked token.
var ErrUnauthenticated = errors.New("invalid or missing token")

var userRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

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

// CreateToken makes a new token for user (created if absent; an agent
// token's user is "agent:LABEL") and returns its secret, which is shown
// once and never stored. admin applies to a user token's user.
func (db *DB) CreateToken(user string, kind Kind, admin bool, label string, now time.Time) (string, Token, error) {
	switch kind {
	case KindUser:
		if err := ValidUserName(user); err != nil {
			return "", Token{}, err
		}
	case KindAgent:
		if label == "" {
			label = AnyNode
		}
		user = "agent:" + label
		admin = false
	default:
		return "", Token{}, fmt.Errorf("token kind %q: want user or agent (node credentials come from EnrolNode)", kind)
	}
	secret, err := newSecret()
	if err != nil {
		return "", Token{}, fmt.Errorf("token: %w", err)
	}
	h := hashToken(secret)
	t := Token{ID: string(h[:12]), User: user, Kind: kind, Label: label, Created: now.UTC()}
	err = db.b.Update(func(tx *bolt.Tx) error {
		if kind == KindUser {
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

// EnrolNode makes the credential of node name, unless the name has one
// (ErrNodeEnrolled: a name is taken over only after RevokeNode), and
// returns its secret, which is shown once and never stored.
func (db *DB) EnrolNode(name string, now time.Time) (string, Token, error) {
	secret, err := newSecret()
	if err != nil {
		return "", Token{}, fmt.Errorf("token: %w", err)
	}
	h := hashToken(secret)
	t := Token{ID: string(h[:12]), User: "node:" + name, Kind: KindNode, Label: name, Created: now.UTC()}
	err = db.b.Update(func(tx *bolt.Tx) error {
		taken := false
		err := tx.Bucket(bTokens).ForEach(func(_, v []byte) error {
			var o Token
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			taken = taken || (o.Kind == KindNode && o.Label == name)
			return nil
		})
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("node %s: %w", name, ErrNodeEnrolled)
		}
		return putJSON(tx.Bucket(bTokens), string(h), t)
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
		b := tx.Bucket(bTokens)
		var keys [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var o Token
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			if o.Kind == KindNode && o.Label == name {
				keys = append(keys, append([]byte(nil), k...))
				gone = append(gone, o)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return gone, err
}

// Authenticate resolves a token's secret to its principal.
func (db *DB) Authenticate(secret string) (Principal, error) {
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
