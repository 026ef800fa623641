package db

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

// A files.changed read back from its packed form is what json.Marshal
// writes of it, whatever its texts.
func TestFilesChangedReadBackIsMarshal(t *testing.T) {
	texts := []string{"", "plain", "a \"quote\" and a \\ back\nnew\rline\ttab", "<b>&amp;</b>", "\u2028\u2029 é 日本",
		"\x00\x01\x1f", string([]byte{0xff, 'a', 0xc3}), "# Summarization 1 of agent main\n\n## user\n\ngo\n"}
	cases := []delegation.FilesChanged{{}, {Changes: []delegation.FileChange{}}}
	for i, s := range texts {
		name := s
		if i == 6 {
			name = "invalid" // a path is valid UTF-8: its packed form is JSON
		}
		cases = append(cases,
			delegation.FilesChanged{Changes: []delegation.FileChange{{Path: "/" + name, Content: s}, {Path: "/gone", Deleted: true}}},
			delegation.FilesChanged{From: "a" + name, Changes: []delegation.FileChange{{Path: "/x.md", Content: s + s}}})
	}
	for _, d := range cases {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		byN := map[int64]string{}
		packed := [][2]any{}
		for i, c := range d.Changes {
			if c.Deleted {
				packed = append(packed, [2]any{c.Path, nil})
				continue
			}
			byN[int64(i+1)] = c.Content
			packed = append(packed, [2]any{c.Path, i + 1})
		}
		var doc any = packed
		if d.Changes == nil {
			doc = nil
		}
		if d.From != "" {
			doc = []any{d.From, doc}
		}
		raw, _ := json.Marshal(doc)
		got, err := unpackFilesChanged(raw, inMemory(byN))
		if err != nil || string(got) != string(want) {
			t.Errorf("got  %s (%v)\nwant %s", got, err, want)
		}
	}
}

// TestArgRefDecodesAsJSON checks that an argument version's reference
// decodes as encoding/json decodes it, escapes, non-ASCII and malformed
// references included: the plain path is only a shortcut.
func TestArgRefDecodesAsJSON(t *testing.T) {
	for _, spec := range []string{
		`["main",1,0,"content"]`, `["sub-1",12345,3,"text"]`, `["a\"b",0,0,"c\\d"]`, `["\u00e9t\u00e9",7,1,"k"]`,
		`["été",7,1,"k\n"]`, `["x\u0000y",1,2,"z"]`, `["",0,0,""]`, `["m",-1,0,"k"]`, `["m",1.5,0,"k"]`,
		`["m","1",0,"k"]`, `["m",1e2,0,"k"]`, `[1,1,0,"k"]`, `["m",1,0,null]`, `["m",+1,0,"k"]`, `["m",01,0,"k"]`,
		"[\"\xff\",1,0,\"k\"]",
	} {
		var got argRef
		gotErr := json.Unmarshal([]byte(spec), &got)
		var raw [4]json.RawMessage
		var want argRef
		wantErr := json.Unmarshal([]byte(spec), &raw)
		if wantErr == nil {
			wantErr = errors.Join(json.Unmarshal(raw[0], &want.Agent), json.Unmarshal(raw[1], &want.Idx),
				json.Unmarshal(raw[2], &want.Pos), json.Unmarshal(raw[3], &want.Key))
		}
		if (gotErr == nil) != (wantErr == nil) || (gotErr == nil && got != want) {
			t.Errorf("%s: decoded %+v (%v), encoding/json %+v (%v)", spec, got, gotErr, want, wantErr)
		}
	}
}
