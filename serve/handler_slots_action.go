package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// Slot files: llama-server's POST /slots/{id}?action=save|restore|erase,
// with the KV kept as pack export files (docs/kvpack.md, "Export file")
// under <home>/slots/<tenant>/.

// maxSlotFilename bounds a slot file's name.
const maxSlotFilename = 255

// checkSlotFilename accepts a plain file name: not empty, at most
// maxSlotFilename bytes, no path separator, not starting with a dot (so
// neither "." nor ".." nor hidden or temporary files), no control
// characters.
func checkSlotFilename(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > maxSlotFilename:
		return fmt.Errorf("is %d bytes, more than %d", len(name), maxSlotFilename)
	case strings.HasPrefix(name, "."):
		return errors.New("starts with a dot")
	case strings.ContainsAny(name, `/\`):
		return errors.New("holds a path separator; want a plain file name")
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errors.New("holds a control character")
	}
	return nil
}

// slotDir is the directory of a tenant's slot files.
func (s *Server) slotDir(tenant string) (string, *apiError) {
	if checkSlotFilename(tenant) != nil {
		return "", &apiError{Status: http.StatusForbidden, Type: typeAuth, Code: "forbidden",
			Message: fmt.Sprintf("the tenant name %q cannot name a directory of slot files", tenant)}
	}
	return filepath.Join(s.opts.Home, "slots", tenant), nil
}

// slotActionRequest is the body of save and restore.
type slotActionRequest struct {
	Filename *string `json:"filename"`
}

// handleSlotAction is llama-server's POST /slots/{id}?action=save|restore|erase.
func (s *Server) handleSlotAction(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 || id >= s.sched.Slots() {
		s.fail(w, r, badRequest("invalid_value", "id_slot", "slot %q: want a slot number from 0 to %d", r.PathValue("id"), s.sched.Slots()-1))
		return
	}
	action := r.URL.Query().Get("action")
	switch action {
	case "save", "restore":
	case "erase":
		s.slotErase(w, r, id)
		return
	default:
		s.fail(w, r, badRequest("invalid_value", "action", "action is %q; want save, restore or erase", action))
		return
	}
	var q slotActionRequest
	if !s.decode(w, r, &q) {
		return
	}
	if q.Filename == nil {
		s.fail(w, r, badRequest("invalid_value", "filename", "filename is missing"))
		return
	}
	if err := checkSlotFilename(*q.Filename); err != nil {
		s.fail(w, r, badRequest("invalid_value", "filename", "filename %q %v", *q.Filename, err))
		return
	}
	dir, e := s.slotDir(info(r).tenant)
	if e != nil {
		s.fail(w, r, e)
		return
	}
	if action == "save" {
		s.slotSave(w, r, id, dir, *q.Filename)
	} else {
		s.slotRestore(w, r, id, dir, *q.Filename)
	}
}

// slotError maps WithSlot's errors.
func (s *Server) slotError(err error) *apiError {
	switch {
	case errors.Is(err, sched.ErrSlotBusy):
		return &apiError{Status: http.StatusConflict, Type: typeUnavailable, Code: "slot_busy", Message: err.Error()}
	case errors.Is(err, sched.ErrBadRequest):
		return badRequest("invalid_value", "id_slot", "%v", err)
	}
	return s.schedError(err, "")
}

// notTenants is the refusal of a slot that holds no KV of the tenant.
func notTenants(id int) *apiError {
	return badRequest("invalid_value", "id_slot", "slot %d holds no KV of this tenant", id)
}

// slotSave publishes the slot's whole blocks into the store and exports
// their pack to dir/name.
func (s *Server) slotSave(w http.ResponseWriter, r *http.Request, id int, dir, name string) {
	start := time.Now()
	salt := s.salter.Salt(info(r).tenant, "")
	var (
		res   store.PublishResult
		saved int
		e     *apiError
	)
	err := s.sched.WithSlot(r.Context(), id, func(ctx context.Context, seq *engine.Sequence, old []byte) []byte {
		if seq.Len() == 0 || !bytes.Equal(old, salt) {
			e = notTenants(id)
			return old
		}
		b := s.store.BlockTokens()
		saved = seq.Len() / b * b
		if saved == 0 {
			e = badRequest("invalid_value", "id_slot", "slot %d holds %d tokens, fewer than one block of %d: nothing to save", id, seq.Len(), b)
			return old
		}
		var err error
		res, err = s.store.PublishPrefix(ctx, s.identity, salt, seq.Tokens()[:saved], func(block int) ([]byte, error) {
			return seq.ExportBlock(block*b, b)
		})
		if err != nil {
			e = &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: fmt.Sprintf("publishing slot %d: %v", id, err)}
		}
		return old
	})
	if err != nil {
		s.fail(w, r, s.slotError(err))
		return
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	n, err := s.exportFile(r.Context(), res.Pack, dir, name)
	if err != nil {
		s.fail(w, r, &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: fmt.Sprintf("writing slot file %s: %v", name, err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": name, "n_saved": saved, "n_written": n,
		"timings": map[string]any{"save_ms": ms(time.Since(start))}})
}

// exportFile writes pack id's export file to dir/name atomically (a
// temporary file, synced, renamed) and returns its size.
func (s *Server) exportFile(ctx context.Context, id pack.Digest, dir, name string) (int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(dir, ".slot-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, a no-op
	if err := s.store.Export(ctx, id, f); err != nil {
		f.Close()
		return 0, err
	}
	n, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return 0, err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return n, nil
}

// slotRestore restores the KV of the pack in dir/name into the slot
// (slotPack verifies the file), through the store like any prefix
// restore (every chunk re-hashed, the Merkle root checked).
func (s *Server) slotRestore(w http.ResponseWriter, r *http.Request, id int, dir, name string) {
	start := time.Now()
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.fail(w, r, &apiError{Status: 404, Type: typeNotFound, Code: "not_found", Param: "filename",
				Message: fmt.Sprintf("no slot file %q", name)})
		} else {
			s.fail(w, r, &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: err.Error()})
		}
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		s.fail(w, r, badRequest("invalid_value", "filename", "slot file %q is not a regular file", name))
		return
	}
	m, e := s.slotPack(r.Context(), f, name)
	if e != nil {
		s.fail(w, r, e)
		return
	}
	salt := s.salter.Salt(info(r).tenant, "")
	if m.Tenant != pack.TenantTag(salt) {
		s.fail(w, r, badRequest("invalid_value", "filename", "slot file %q holds no KV of this tenant", name))
		return
	}
	tokens := m.Tokens
	if len(tokens) >= s.sched.Ctx() {
		s.fail(w, r, badRequest("context_length_exceeded", "filename", "slot file %q holds %d tokens; a slot holds %d", name, len(tokens), s.sched.Ctx()))
		return
	}
	restored := 0
	err = s.sched.WithSlot(r.Context(), id, func(ctx context.Context, seq *engine.Sequence, old []byte) []byte {
		seq.Truncate(0)
		// One more token after the pack's: RestorePrefix keeps the last
		// prompt token to compute, and here every pack token is wanted.
		n, err := s.model.eng.RestorePrefix(ctx, s.store, s.identity, salt, seq, append(tokens[:len(tokens):len(tokens)], 0))
		switch {
		case err != nil:
			e = &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: fmt.Sprintf("restoring slot %d: %v", id, err)}
		case n != len(tokens):
			e = &apiError{Status: 500, Type: typeServer, Code: "internal_error",
				Message: fmt.Sprintf("restoring slot %d: the store restored %d of the %d tokens of %q", id, n, len(tokens), name)}
		}
		if e != nil {
			seq.Truncate(0)
			return nil
		}
		restored = n
		return salt
	})
	if err != nil {
		s.fail(w, r, s.slotError(err))
		return
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": name, "n_restored": restored, "n_read": fi.Size(),
		"timings": map[string]any{"restore_ms": ms(time.Since(start))}})
}

// slotErase empties the slot.
func (s *Server) slotErase(w http.ResponseWriter, r *http.Request, id int) {
	salt := s.salter.Salt(info(r).tenant, "")
	var (
		erased int
		e      *apiError
	)
	err := s.sched.WithSlot(r.Context(), id, func(ctx context.Context, seq *engine.Sequence, old []byte) []byte {
		if seq.Len() > 0 && !bytes.Equal(old, salt) {
			e = notTenants(id)
			return old
		}
		erased = seq.Len()
		seq.Truncate(0)
		return nil
	})
	if err != nil {
		s.fail(w, r, s.slotError(err))
		return
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "n_erased": erased})
}

// slotPack verifies the slot file f and returns its pack's manifest, the
// pack then being in the store. The file is read whole: its structure,
// every chunk against its ID and the file digest (pack.FileReader). When
// the store already holds the pack (a file this server saved, or
// restored before), the store's copy is used: importing it again would
// be refused by the replay ledger, and the file is then only a name for
// verified content. Otherwise the file is imported like `muser pack
// import` (seal, replay ledger, identity, chunks, root; a refusal leaves
// a receipt).
func (s *Server) slotPack(ctx context.Context, f *os.File, name string) (*pack.Manifest, *apiError) {
	refused := func(err error) *apiError {
		return badRequest("invalid_value", "filename", "slot file %q refused: %v", name, err)
	}
	internal := func(err error) *apiError {
		return &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: fmt.Sprintf("slot file %q: %v", name, err)}
	}
	fr, err := pack.NewFileReader(bufio.NewReader(f))
	for err == nil {
		if _, _, err = fr.Next(); err == io.EOF {
			err = fr.Finish()
			break
		}
	}
	if err == nil {
		id := fr.PackID()
		if diff := s.identity.Diff(fr.Manifest().Identity); len(diff) > 0 {
			return nil, badRequest("invalid_value", "filename", "slot file %q holds KV of another model or engine (identity fields %v differ)", name, diff)
		}
		if m, err := s.store.Manifest(id); err == nil {
			return m, nil
		}
	}
	// Not in the store, or damaged: import it (a refusal leaves a receipt).
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, internal(err)
	}
	res, err := s.store.Import(ctx, bufio.NewReader(f), store.ImportOptions{Expect: &s.identity, Source: "slot:" + name})
	if err != nil {
		var re *store.RefusalError
		if errors.As(err, &re) {
			return nil, refused(err)
		}
		return nil, internal(err)
	}
	m, err := s.store.Manifest(res.Pack)
	if err != nil {
		return nil, internal(err)
	}
	return m, nil
}
