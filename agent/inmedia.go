package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// DefaultInboundMediaBytes caps a file of a received message the agent
// forwards: the server's default cap (16 MiB, WhatsApp's own for images,
// audio and video). A bigger file is not downloaded; the message's text
// still is forwarded, and the log says which file was left out.
const DefaultInboundMediaBytes = 16 << 20

// DefaultUploadStall is the time an upload of a received file may take
// for each 256 KiB (uploadStep), and for its answer: the server's own
// bound, so a slow link's upload takes as long as the server lets it
// (PROTOCOL.md 16.3): 16 MiB over GPRS's two uplink timeslots (26.8
// kbit/s) takes 84 minutes, 78 s for each 256 KiB. One past it is given up
// and tried again later.
const DefaultUploadStall = 2 * time.Minute

// uploadStep is how many bytes of an upload each UploadStall must see.
const uploadStep = 256 << 10

// maxFilesPerMessage is PROTOCOL.md 16.3's bound on inbound.media: the
// server refuses a message naming more, so the rest are left out (logged).
const maxFilesPerMessage = 10

// uploadRetry is the wait before uploading a file again after a failure
// the server or the network may get over.
const uploadRetry = 30 * time.Second

// File is a file of a received message (an image, a voice note, a document).
type File struct {
	ContentType string
	Filename    string
	// Size is the file's size as the service announced it; Data is empty
	// when the transport did not download it because Size is over the cap
	// (the sink logs it and forwards the text without it).
	Size int64
	Data []byte
}

// spooled is a received file waiting in the journal's media directory
// until it is uploaded (then ID is set and the file removed).
type spooled struct {
	Path        string `json:"path,omitempty"`
	ContentType string `json:"content_type"`
	Filename    string `json:"filename,omitempty"`
	Size        int64  `json:"size"`
	ID          string `json:"id,omitempty"`
}

// mediaDir is where received files wait for their upload: beside the
// journal, private to the agent's user.
func (j *Journal) mediaDir() string { return j.db.Path() + ".media" }

// spool writes the files of one received message to disk, durably, and
// returns their records; files over max are logged and left out. On an
// error it returns the records of the files it wrote, for their removal.
func (a *Agent) spool(clientID string, files []File) ([]spooled, error) {
	max := a.opt.InboundMediaBytes
	var out []spooled
	for i, f := range files {
		if len(out) == maxFilesPerMessage {
			a.log.Warn("received file not forwarded: a message carries at most 10 files; the rest are left out",
				"client_id", clientID, "files", len(files))
			break
		}
		if f.Size > max || int64(len(f.Data)) > max {
			a.log.Warn("received file not forwarded: it is over the size cap; the message's text is forwarded without it",
				"client_id", clientID, "file", i, "content_type", f.ContentType, "bytes", max64(f.Size, int64(len(f.Data))), "max_bytes", max)
			continue
		}
		if len(f.Data) == 0 {
			a.log.Warn("received file not forwarded: it is empty or could not be downloaded", "client_id", clientID, "file", i, "content_type", f.ContentType)
			continue
		}
		dir := a.j.mediaDir()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return out, fmt.Errorf("media spool: %w", err)
		}
		// A name of its own per take: a message taken again (WhatsApp
		// delivers it again after a crash before its ack) never overwrites
		// or removes the file its first take is still uploading.
		sum := sha256.Sum256([]byte(clientID))
		p, err := writeSynced(dir, hex.EncodeToString(sum[:12])+"-"+strconv.Itoa(i)+"-*", f.Data)
		if err != nil {
			return out, fmt.Errorf("media spool: %w", err)
		}
		out = append(out, spooled{Path: p, ContentType: f.ContentType, Filename: safeFilename(f.Filename), Size: int64(len(f.Data))})
	}
	return out, nil
}

// maxFilenameBytes is the server's bound on a file's name (POST /device/media).
const maxFilenameBytes = 255

// safeFilename is the sender's name of a file as the server takes it: the
// server refuses slashes, control characters and text-direction marks (a
// right-to-left override shows "invoice\u202Efdp.exe" as "invoiceexe.pdf"),
// and names over 255 bytes, and the agent would then forward the message
// without the file. They become "_", invalid UTF-8 too, and a long name is
// cut at a character's boundary.
func safeFilename(name string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(name, "_"))
	return proto.CutBytes(name, maxFilenameBytes)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// writeSynced writes data to a new file of dir (mode 0600) named by
// pattern, durably, and returns its path.
func writeSynced(dir, pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// uploader uploads the spooled files of journaled inbound messages
// (POST /device/media) and records their ids, so the pump can send the
// messages' frames; it retries what the server or the network refused for
// now, and drops (with a log line) what the server refuses for good.
func (a *Agent) uploader(ctx context.Context) {
	tick := time.NewTicker(a.opt.DeliveryPoll)
	defer tick.Stop()
	later := map[string]time.Time{} // path -> not before
	for {
		a.uploadRound(ctx, later)
		select {
		case <-ctx.Done():
			return
		case <-a.mediaWake:
		case <-tick.C:
		}
	}
}

// uploadRound uploads each spooled file whose time came (later: path ->
// not before). A file's wait is forgotten once the journal no longer holds
// it for an upload (uploaded, given up, its message refused or dropped), so
// an agent that runs for months keeps no entry per file that once waited.
func (a *Agent) uploadRound(ctx context.Context, later map[string]time.Time) {
	recs, err := a.j.inbound()
	if err != nil {
		a.log.Error("journal read failed", "err", err)
	} else {
		pending := map[string]bool{}
		for _, r := range recs {
			for _, f := range r.Files {
				if f.ID == "" && f.Path != "" {
					pending[f.Path] = true
				}
			}
		}
		for p := range later {
			if !pending[p] {
				delete(later, p)
			}
		}
	}
	for _, r := range recs {
		for i, f := range r.Files {
			if f.ID != "" || f.Path == "" || ctx.Err() != nil || time.Now().Before(later[f.Path]) {
				continue
			}
			id, retry, err := a.upload(ctx, r.Frame.ClientID, i, f)
			switch {
			case err == nil:
				delete(later, f.Path)
				a.log.Info("received file uploaded", "client_id", r.Frame.ClientID, "file", i, "media", id, "bytes", f.Size)
			case retry > 0:
				later[f.Path] = time.Now().Add(retry)
				a.log.Warn("received file not uploaded yet; retrying", "client_id", r.Frame.ClientID, "file", i, "retry_in", retry, "err", err)
				continue
			default:
				delete(later, f.Path)
				a.log.Error("received file refused by the server; the message's text is forwarded without it", "client_id", r.Frame.ClientID, "file", i, "err", err)
			}
			if err := a.j.setFileID(r.Frame.ClientID, i, id); err != nil {
				a.log.Error("journal write failed", "err", err)
				continue
			}
			os.Remove(f.Path)
			wake(a.pumpWake)
		}
	}
}

// upload sends one file; the key (client_id and the file's place) makes a
// repeat answer the first upload. retry > 0 is a failure worth retrying.
func (a *Agent) upload(ctx context.Context, clientID string, i int, f spooled) (id string, retry time.Duration, err error) {
	// Streamed from the spool: the agent holds no upload in memory.
	file, err := os.Open(f.Path)
	if err != nil {
		return "", 0, fmt.Errorf("read spooled file: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("read spooled file: %w", err)
	}
	q := url.Values{"key": {clientID + "/" + strconv.Itoa(i)}}
	if f.Filename != "" {
		q.Set("filename", f.Filename)
	}
	ctx, cancel := context.WithTimeout(ctx, a.opt.UploadStall*time.Duration(1+(st.Size()+uploadStep-1)/uploadStep))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.opt.Config.Server, "/")+"/device/media?"+q.Encode(), file)
	if err != nil {
		return "", 0, err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Authorization", "Bearer "+a.opt.Config.DeviceToken)
	ct := f.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	req.Header.Set("Content-Type", ct)
	c := a.opt.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		return "", uploadRetry, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated {
		var out struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &out); err != nil || out.ID == "" {
			return "", uploadRetry, fmt.Errorf("POST /device/media: %s: no id in the answer", res.Status)
		}
		return out.ID, 0, nil
	}
	err = fmt.Errorf("POST /device/media: %s: %s", res.Status, bytes.TrimSpace(body))
	switch {
	case res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusUnauthorized ||
		res.StatusCode == http.StatusForbidden || res.StatusCode == http.StatusRequestTimeout || res.StatusCode >= 500:
		// 403: the device is disabled for now; the file waits, as the
		// message does, until it is enabled again. 408: the upload stalled
		// on the way (the server cuts one that sends no 256 KiB in two minutes).
		wait := uploadRetry
		if s, e := strconv.Atoi(res.Header.Get("Retry-After")); e == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return "", wait, err
	}
	return "", 0, err
}

// setFileID records the server's id of a message's file ("" for a file
// the server refused for good: the message goes without it).
func (j *Journal) setFileID(clientID string, i int, id string) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		_, err := updateInbound(tx, clientID, func(rec *inboundRecord) (bool, error) {
			if i >= len(rec.Files) {
				return false, errors.New("journal: no such file")
			}
			rec.Files[i].ID, rec.Files[i].Path = id, ""
			return false, nil
		})
		return err
	})
}

// uploaded is whether every file of the message is uploaded (or given
// up), and the ids of those uploaded, in order: the frame's media.
func (r inboundRecord) uploaded() ([]string, bool) {
	var ids []string
	for _, f := range r.Files {
		if f.Path != "" {
			return nil, false
		}
		if f.ID != "" {
			ids = append(ids, f.ID)
		}
	}
	return ids, true
}

// removeSpooled deletes the files of a message that is forgotten.
func (r inboundRecord) removeSpooled() {
	for _, f := range r.Files {
		if f.Path != "" {
			os.Remove(f.Path)
		}
	}
}
