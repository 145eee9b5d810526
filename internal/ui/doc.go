// Package ui is Gandiva's web dashboard and its HTML report.
//
// Handler serves the dashboard under /ui/: static assets embedded in the
// binary (plain HTML, CSS and JavaScript modules drawing on canvas and SVG;
// no CDN, no build step) and a JSON API under /ui/api/ that the page polls.
// The data comes from a DataSource, which the live server implements over
// its engine and timeline.Recorder; Memory is an in-memory one for tests
// and for tools. Every /ui/api/ call carries the same bearer tokens as the
// /v1 API, and the DataSource gets the authenticated principal: it decides
// what that principal may see (a user their own jobs, an admin all). The
// handler checks its answers as well, and refuses (500) to send a non-admin
// another user's job should a DataSource get that wrong.
//
// WriteReport writes the same timeline as one self-contained HTML file
// (scripts, styles and data inlined) that opens from disk with no server:
// `gandiva sim --html FILE`, and what-if comparisons side by side.
//
// The JSON shapes are the types of this package and of internal/timeline;
// docs/DASHBOARD.md describes them for people.
package ui
