package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A message taken again before its file was uploaded (WhatsApp delivers
// it again after a crash before its ack) keeps the file of its first take:
// the second take's copy is removed, the first is not touched. Files over
// the cap and past the tenth are left out of the journal.
func TestReceivedFilesSpooledOncePerMessage(t *testing.T) {
	t.Parallel()
	j := tempJournal(t)
	a := New(Options{Config: ConfigFile{Salt: "s1"}, Journal: j, InboundMediaBytes: 100})
	files := []File{{ContentType: "image/png", Data: []byte("first")}, {ContentType: "video/mp4", Size: 101}}
	for i := 0; i < 11; i++ {
		files = append(files, File{ContentType: "text/plain", Data: []byte("note")})
	}
	msg := Received{Key: "wa:1", Channel: proto.ChannelWhatsApp, From: "+15557654321", To: "+15550100001", Text: "hi", Media: files}
	for range 2 {
		if err := (sink{a}).Take([]Received{msg}, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := j.inbound()
	if err != nil || len(recs) != 1 {
		t.Fatalf("journal: %v %v, want one message", recs, err)
	}
	got := recs[0].Files
	if len(got) != 10 || got[0].ContentType != "image/png" || got[1].ContentType != "text/plain" {
		t.Fatalf("journaled files: %+v, want the image and nine notes (the video is over the cap)", got)
	}
	for _, f := range got {
		if b, err := os.ReadFile(f.Path); err != nil || len(b) == 0 {
			t.Fatalf("spooled file %s: %v", f.Path, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(j.mediaDir(), "*"))
	if len(left) != len(got) {
		t.Fatalf("spool holds %d files, want the %d journaled", len(left), len(got))
	}
}

// A sender's file name the server would refuse (slashes, control
// characters, text-direction marks, over 255 bytes, invalid UTF-8) is
// journaled made safe, so the file is uploaded rather than dropped; an
// ordinary name stays as it is.
func TestReceivedFileNamesMadeSafe(t *testing.T) {
	t.Parallel()
	j := tempJournal(t)
	a := New(Options{Config: ConfigFile{Salt: "s1"}, Journal: j, InboundMediaBytes: 100})
	names := map[string]string{
		"Quote 7.pdf":            "Quote 7.pdf",
		"résumé.doc":             "résumé.doc",
		"invoice\u202Efdp.exe":   "invoice_fdp.exe",
		"../etc/passwd":          ".._etc_passwd",
		"a\\b\tc\x00d\r\n.pdf":   "a_b_c_d__.pdf",
		"bad\xffutf8.txt":        "bad_utf8.txt",
		strings.Repeat("é", 200): strings.Repeat("é", 127),
	}
	var files []File
	var want []string
	for in, out := range names {
		files = append(files, File{ContentType: "application/pdf", Filename: in, Data: []byte("x")})
		want = append(want, out)
	}
	if err := (sink{a}).Take([]Received{{Key: "wa:2", Channel: proto.ChannelWhatsApp, From: "+15557654321", To: "+15550100001", Media: files}}, "", ""); err != nil {
		t.Fatal(err)
	}
	recs, err := j.inbound()
	if err != nil || len(recs) != 1 || len(recs[0].Files) != len(want) {
		t.Fatalf("journal: %+v %v, want one message with %d files", recs, err, len(want))
	}
	for i, f := range recs[0].Files {
		if f.Filename != want[i] {
			t.Errorf("file %d: journaled name %q, want %q", i, f.Filename, want[i])
		}
	}
}

// Files spooled for messages the journal could not take are removed: the
// transport hands the messages in again (every few seconds while the
// journal fails), and each take would otherwise leave copies no record
// names, until the disk is full.
func TestSpooledFilesOfAFailedTakeAreRemoved(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	// The same journal read-only: every commit fails.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	j = &Journal{db: db}
	t.Cleanup(func() { j.Close() })
	a := New(Options{Config: ConfigFile{Salt: "s1"}, Journal: j})
	msg := Received{Key: "wa:1", Channel: proto.ChannelWhatsApp, From: "+15557654321", To: "+15550100001", Text: "hi",
		Media: []File{{ContentType: "image/png", Data: []byte("a picture")}}}
	for range 3 {
		if err := (sink{a}).Take([]Received{msg}, "", ""); err == nil {
			t.Fatal("a take the journal could not commit returned no error")
		}
	}
	if left, _ := filepath.Glob(filepath.Join(j.mediaDir(), "*")); len(left) != 0 {
		t.Fatalf("spool holds %v after takes that were not journaled, want nothing", left)
	}
}
