package fair

import (
	"math"
	"slices"
	"strings"
)

// Bid is one user's bid in a trading auction: its measured speedup of the
// fast GPU type over the slow one (GPU-weighted over its jobs).
type Bid struct {
	User    string
	Speedup float64
}

// Trade is one exchange decided by an auction: Seller gives Buyer Amount
// fast GPUs' worth of its share of the Fast type and receives Price slow
// GPUs' worth of the Buyer's share of the Slow type for each.
type Trade struct {
	Fast, Slow    string
	Buyer, Seller string
	// BuyerBid and SellerBid are the two users' speedups of Fast over Slow.
	BuyerBid, SellerBid float64
	// Price is slow GPUs per fast GPU: the second-highest bid (Vickrey), so
	// no bidder sets the price it trades at.
	Price float64
	// Amount is fast GPUs (a share of the type's GPU-time) that change hands.
	Amount float64
}

// auction picks the trade among bids (at least three, for a second price
// that is neither trader's own bid): the highest bidder buys, the lowest
// bidder that holds some of the fast type sells (canSell), at the
// second-highest bid. It trades only when both gain strictly: seller's bid
// < price < buyer's bid. Ties between bids go to the lower user name; tied
// top bids mean no trade (the price would equal the buyer's own bid).
func auction(bids []Bid, canSell func(user string) bool) (buyer, seller Bid, price float64, ok bool) {
	if len(bids) < 3 {
		return Bid{}, Bid{}, 0, false
	}
	b := slices.Clone(bids)
	slices.SortFunc(b, func(x, y Bid) int {
		if x.Speedup != y.Speedup {
			if x.Speedup > y.Speedup {
				return -1
			}
			return 1
		}
		return strings.Compare(x.User, y.User)
	})
	buyer, price = b[0], b[1].Speedup
	if !(buyer.Speedup > price) {
		return Bid{}, Bid{}, 0, false
	}
	for i := len(b) - 1; i >= 2; i-- {
		if b[i].Speedup >= price {
			break
		}
		if canSell(b[i].User) {
			return buyer, b[i], price, true
		}
	}
	return Bid{}, Bid{}, 0, false
}

// pricing is the price of a trade under a price rule, given the trade the
// auction chose and its second price: "second" (the default, the paper's
// Vickrey rule: no trader sets its own price), "first" (the buyer pays its
// own bid) or "midpoint" (halfway between the traders' bids). The last two
// are not incentive-compatible; they exist so that the reproduction's
// gaming check can be shown to reject them.
func pricing(rule string, buyer, seller Bid, second float64) float64 {
	switch rule {
	case "first":
		return buyer.Speedup
	case "midpoint":
		return (buyer.Speedup + seller.Speedup) / 2
	}
	return second
}

// share is one user's part of the plan for one GPU type.
type share struct {
	user   *user
	weight float64 // entitlement after trades, in GPUs
	demand float64 // GPUs of the user's jobs assigned to the type
	alloc  float64 // the user's fair allocation, in GPUs
}

// waterfill divides capacity among users in proportion to weight, none
// getting more than its demand; what capped users leave goes to the others
// in proportion to their weights. Users with zero weight get only what
// nobody with weight can use. It sets alloc.
func waterfill(sh []share, capacity float64) {
	total := 0.0
	for i := range sh {
		total += sh[i].demand
	}
	if total <= capacity {
		for i := range sh {
			sh[i].alloc = sh[i].demand
		}
		return
	}
	idx := byLevel(sh)
	left, wsum := capacity, 0.0
	for _, i := range idx {
		wsum += sh[i].weight
	}
	for k, i := range idx {
		level := left / wsum
		if sh[i].demand <= level*sh[i].weight {
			sh[i].alloc = sh[i].demand
			left -= sh[i].demand
			wsum -= sh[i].weight
			continue
		}
		for _, j := range idx[k:] {
			sh[j].alloc = level * sh[j].weight
		}
		left = 0
		break
	}
	if left > 1e-9 {
		fillUnweighted(sh, left)
	}
}

// byLevel zeroes every allocation and returns the shares with weight and
// demand in order of demand/weight: users saturate in that order as the
// water level rises (ties by index).
func byLevel(sh []share) []int {
	idx := make([]int, 0, len(sh))
	for i := range sh {
		sh[i].alloc = 0
		if sh[i].weight > 0 && sh[i].demand > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int {
		ra, rb := sh[a].demand/sh[a].weight, sh[b].demand/sh[b].weight
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return a - b
	})
	return idx
}

// fillUnweighted gives what is left, once every user with weight is
// capped, to the users without weight, in proportion to their demands.
func fillUnweighted(sh []share, left float64) {
	var zero []int
	zd := 0.0
	for i := range sh {
		if sh[i].weight <= 0 && sh[i].demand > 0 {
			zero = append(zero, i)
			zd += sh[i].demand
		}
	}
	for _, i := range zero {
		sh[i].alloc = math.Min(sh[i].demand, left*sh[i].demand/zd)
	}
}

// splitJobs divides a user's allocation among its jobs equally, no job
// getting more than its gang size; what capped jobs leave goes to the
// others equally. sizes and the result are parallel.
func splitJobs(alloc float64, sizes []int, out []float64) []float64 {
	out = out[:0]
	for range sizes {
		out = append(out, 0)
	}
	idx := make([]int, len(sizes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if sizes[a] != sizes[b] {
			return sizes[a] - sizes[b]
		}
		return a - b
	})
	left := alloc
	for k, i := range idx {
		each := left / float64(len(idx)-k)
		if float64(sizes[i]) <= each {
			out[i] = float64(sizes[i])
			left -= out[i]
			continue
		}
		for _, j := range idx[k:] {
			out[j] = each
		}
		break
	}
	return out
}
