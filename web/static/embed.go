// Package static holds the studio's CSS and its small script, embedded in
// the binary so the studio is one file.
package static

import "embed"

// Files are the static assets, served under /static/.
//
//go:embed app.css app.js favicon.svg
var Files embed.FS
