package present

import (
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// CompareSide is what a comparison shows of one session: its page state's
// tree and costs, and the receipts, read by their places.
func (p *Page) CompareSide() (templates.CompareSide, error) {
	st := p.st
	side := templates.CompareSide{ID: st.Session.ID, Name: st.Session.Name, Title: st.Session.Title, Status: st.Session.Status,
		Error: st.Session.Error, StoppedBy: st.Session.StoppedBy, Code: st.Session.Code, Tree: p.tree(""), Calls: st.Calls, Tokens: st.Tokens, Totals: totals(st)}
	var walk func(n *view.Node) error
	walk = func(n *view.Node) error {
		a := n.Agent
		ac := templates.AgentCost{ID: a.ID, Name: a.Name, Mode: a.Mode, Status: a.Status, Own: a.OwnTokens, Subtree: n.SubtreeTokens,
			Entry: a.EntryTokens, Inherited: a.InheritedTokens, Calls: a.Calls,
			EntryCached: a.EntryCached, SubtreeCached: n.SubtreeCached, Cost: n.SubtreeCost.Total, Priced: n.SubtreeCost.Priced()}
		if ac.Priced {
			ac.SubtreeCost = view.Dollars(ac.Cost)
		}
		if d := n.Delegation; d != nil && d.Receipt != nil {
			m, err := p.rd.MessageAt(p.ctx, d.Receipt.AgentID, d.Receipt.Index)
			if err != nil {
				return err
			}
			if m != nil {
				ac.Receipt, ac.ReceiptIsError, ac.HasReceipt = m.Content, m.IsError, true
			}
		}
		first, err := p.rd.FirstCall(p.ctx, a.ID)
		if err != nil {
			return err
		}
		if first != nil {
			for _, r := range first.Context {
				ac.EntryMessages += r.Len()
			}
		}
		side.Agents = append(side.Agents, ac)
		for _, c := range n.Children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if root := st.Tree(); root != nil {
		if err := walk(root); err != nil {
			return side, err
		}
	}
	return side, nil
}
