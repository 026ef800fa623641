package tokens

import "testing"

// TestClassTable checks the BMP class table against the unicode tables for
// every rune.
func TestClassTable(t *testing.T) {
	loadClasses()
	bad := 0
	for r := rune(0); r < 0x10000; r++ {
		if got, want := bmpClasses[r], classifySlow(r); got != want {
			t.Errorf("class of %U = %#x, want %#x", r, got, want)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
}
