package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/delegationstudio/studio/internal/i18n"
)

// TestReadOnlyServe: `studio serve --read-only` on a database holding a
// session: its pages show the banner, the home page's and a lesson's Run
// buttons are off with the reason as their title, and the session's
// export link still gives its trace.
func TestReadOnlyServe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	out, err := exec.Command(studioBin, "run", "../examples/order-number.json", "--db", path, "--json").Output()
	if err != nil {
		t.Fatalf("studio run --db: %v", err)
	}
	var tr apiTrace
	if err := json.Unmarshal(out, &tr); err != nil || tr.Session.ID == "" {
		t.Fatalf("studio run --json printed no session (%v)", err)
	}
	id := tr.Session.ID
	s := startStudio(t, "--db", path, "--read-only")
	tb := newTab(t)
	banner := `(document.querySelector('[data-testid="read-only"]') || {}).dataset?.reason === 'asked' && document.querySelector('[data-testid="read-only"]').offsetHeight > 0`
	describe := `(document.querySelector('main') || document.body).innerText.slice(0, 400)`
	// offButton says that the button testid names is disabled, its title
	// the read-only reason.
	offButton := func(testid string) string {
		b := `document.querySelector('[data-testid="` + testid + `"]')`
		return b + ` && ` + b + `.disabled && ` + b + `.title === ` + jsString(i18n.Get(i18n.English).Raw("readonly.button"))
	}

	tb.navigate(s.URL + "/")
	tb.waitFor("the home page shows the read-only banner", banner, describe)
	tb.waitFor("the home page's Run button is off, saying why", offButton("start-here-run"), describe)
	tb.navigate(s.URL + "/lessons/order-number")
	tb.waitFor("the lesson's Run button is off, saying why", banner+` && `+offButton("run-lesson"), describe)
	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the session page shows the read-only banner", banner, describe)
	tb.screenshot("session")
	got := eval[string](tb, `(async () => {
		const r = await fetch(document.querySelector('[data-testid="export-json"]').href);
		return r.status + ' ' + (await r.json()).session.id;
	})()`, chromedp.EvalAwaitPromise)
	if got != "200 "+id {
		t.Fatalf("the export link answers %q; want 200 with session %s", got, id)
	}
}
