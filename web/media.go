package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// liveFile is a file of a received message as the pages draw it: images a
// browser shows inline, everything else a download.
type liveFile struct {
	ID          string `json:"id"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Filename    string `json:"filename"`
	URL         string `json:"url"`
	Inline      bool   `json:"inline"`
	// Label is the file's name and size, for the download link.
	Label string `json:"label"`
}

func liveFiles(refs []store.MediaRef) []liveFile {
	out := make([]liveFile, 0, len(refs))
	for _, f := range refs {
		name := f.Filename
		if name == "" {
			name = f.ContentType
		}
		out = append(out, liveFile{ID: f.ID, ContentType: f.ContentType, Size: f.Size, Filename: f.Filename,
			URL: Prefix + "/media/" + f.ID, Inline: media.Inline(f.ContentType), Label: fmt.Sprintf("%s (%s)", name, sizeOf(f.Size))})
	}
	return out
}

// sizeOf is a byte count in words people read.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// mediaRoutes serves the files of received messages to the signed-in
// members of their company, under the console's own cookie (the API's GET
// /media/{id} takes a bearer credential, which a page's <img> cannot send).
func (c *Console) mediaRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/media/{id}", c.page(member, c.mediaFile))
}

// mediaFile sends a file as the API does (media.Serve): inline only for
// images a browser shows, nosniff, and a sandbox so that nothing in it runs;
// the browser asks again before it shows a copy it kept, so a file is
// never shown without a session (media.ServeBehindSession).
func (c *Console) mediaFile(w http.ResponseWriter, r *http.Request, q *req) error {
	m, err := c.deps.Media.Get(q.p().CompanyID, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		return problem.New(problem.NotFound, "No such file.")
	}
	if err != nil {
		return err
	}
	if err := c.deps.Media.ServeBehindSession(w, r, m); err != nil {
		if refused, ok := err.(*problem.Error); ok {
			return refused // a range past the end (416) or the company's downloads all under way (429), before anything was written
		}
		c.deps.Logger.Warn("console: media copy failed", "media", m.ID, "err", err)
	}
	return nil
}
