package tokens

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

//go:generate go test -run ^TestVocabFilesFresh$ -update .

var update = flag.Bool("update", false, "rewrite the embedded vocabulary tables in data/ from the tiktoken vocabularies")

// TestVocabFilesFresh checks that each embedded table is exactly what the
// generator makes from the tiktoken vocabulary that tiktoken-go-loader
// bundles; with -update (go generate) it rewrites them.
func TestVocabFilesFresh(t *testing.T) {
	for _, e := range []*bpe{o200k, cl100k} {
		want, err := generateVocab(e.url)
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		path := filepath.Join("data", e.name+".bin")
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal([]byte(e.table), want) {
			t.Errorf("%s: the embedded table is stale (%d bytes, the generator makes %d): run go generate ./internal/tokens", path, len(e.table), len(want))
		}
	}
}

// generateVocab makes the table of a tiktoken vocabulary, whose ranks must
// be 0 … n-1 with no gap.
func generateVocab(url string) ([]byte, error) {
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(url)
	if err != nil {
		return nil, err
	}
	toks := make([]string, len(ranks))
	for tok, r := range ranks {
		if r < 0 || r >= len(toks) || toks[r] != "" {
			return nil, fmt.Errorf("rank %d of %q is out of order: the ranks must be 0 … %d, each once", r, tok, len(toks)-1)
		}
		toks[r] = tok
	}
	return encodeVocab(toks)
}
