package adminapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/muserhq/muser/store"
)

// Headers of POST /admin/v1/import besides the body (the export file).
const (
	// HeaderSealKey carries the secret the seal must verify under,
	// base64 (standard encoding); absent: the store's own key.
	HeaderSealKey = "X-Muser-Seal-Key"
	// HeaderExpectIdentity carries the identity the pack must have, as
	// the JSON of Identity.
	HeaderExpectIdentity = "X-Muser-Expect-Identity"
)

// Client is the API over a running server's admin endpoint.
type Client struct {
	// URL is the server's base URL ("http://127.0.0.1:4949").
	URL string
	// Key is the admin key, sent as a bearer token when not empty.
	Key string
	// HTTP is the client (http.DefaultClient if nil).
	HTTP *http.Client
}

var _ API = (*Client)(nil)

// do sends one request and decodes a 200 answer into out; any other
// status becomes the *Error the server sent.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, header http.Header, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("admin endpoint %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("admin endpoint %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *Error `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
			return &Error{Status: resp.StatusCode, Code: CodeFailed,
				Message: fmt.Sprintf("admin endpoint %s %s: HTTP %d: %.200s", method, path, resp.StatusCode, b)}
		}
		e.Error.Status = resp.StatusCode
		return e.Error
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("admin endpoint %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, path, bytes.NewReader(b), http.Header{"Content-Type": {"application/json"}}, out)
}

// Packs lists every pack, oldest first.
func (c *Client) Packs(ctx context.Context) ([]store.PackInfo, error) {
	var out []store.PackInfo
	err := c.do(ctx, http.MethodGet, "/admin/v1/packs", nil, nil, &out)
	return out, err
}

// Stats returns the store's totals.
func (c *Client) Stats(ctx context.Context) (store.Stats, error) {
	var out store.Stats
	err := c.do(ctx, http.MethodGet, "/admin/v1/stats", nil, nil, &out)
	return out, err
}

// Inspect returns one pack's record and manifest.
func (c *Client) Inspect(ctx context.Context, id string) (Inspect, error) {
	var out Inspect
	err := c.do(ctx, http.MethodGet, "/admin/v1/packs/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Verify runs a verify on the server. With progress non-nil it asks for
// the streamed answer (ProgressContentType) and calls progress as the
// server reports.
func (c *Client) Verify(ctx context.Context, req VerifyRequest, progress func(done, total int)) (VerifyReport, error) {
	var out VerifyReport
	if progress == nil {
		err := c.post(ctx, "/admin/v1/verify", req, &out)
		return out, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/admin/v1/verify", bytes.NewReader(b))
	if err != nil {
		return out, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", ProgressContentType)
	if c.Key != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return out, fmt.Errorf("admin endpoint %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, c.errorOf(resp, "POST", "/admin/v1/verify")
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, 1<<30))
	for {
		var ev VerifyEvent
		if err := dec.Decode(&ev); err != nil {
			return out, fmt.Errorf("admin endpoint POST /admin/v1/verify: the stream ended without a report: %w", err)
		}
		switch {
		case ev.Progress != nil:
			progress(ev.Progress.Done, ev.Progress.Total)
		case ev.Error != nil:
			return out, ev.Error
		case ev.Report != nil:
			return *ev.Report, nil
		}
	}
}

// Export streams the pack's export file from the server into w. A stream
// the server broke off (the export failed after it began) is an error, so
// a caller never keeps a partial file.
func (c *Client) Export(ctx context.Context, id string, w io.Writer) error {
	path := "/admin/v1/packs/" + url.PathEscape(id) + "/export"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.URL, "/")+path, nil)
	if err != nil {
		return err
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("admin endpoint %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.errorOf(resp, "GET", path)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("admin endpoint GET %s: the export stream broke off: %w", path, err)
	}
	return nil
}

// errorOf reads a non-200 answer's error.
func (c *Client) errorOf(resp *http.Response, method, path string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
		return &Error{Status: resp.StatusCode, Code: CodeFailed,
			Message: fmt.Sprintf("admin endpoint %s %s: HTTP %d: %.200s", method, path, resp.StatusCode, b)}
	}
	e.Error.Status = resp.StatusCode
	return e.Error
}

// GC runs gc on the server.
func (c *Client) GC(ctx context.Context, req GCRequest) (GCReport, error) {
	var out GCReport
	err := c.post(ctx, "/admin/v1/gc", req, &out)
	return out, err
}

// Remove deletes packs on the server.
func (c *Client) Remove(ctx context.Context, req RemoveRequest) (RemoveReport, error) {
	var out RemoveReport
	err := c.post(ctx, "/admin/v1/remove", req, &out)
	return out, err
}

// Pin pins or unpins a pack on the server.
func (c *Client) Pin(ctx context.Context, id string, pin bool) (PinReport, error) {
	verb := "unpin"
	if pin {
		verb = "pin"
	}
	var out PinReport
	err := c.do(ctx, http.MethodPost, "/admin/v1/packs/"+url.PathEscape(id)+"/"+verb, nil, nil, &out)
	return out, err
}

// Receipts lists receipts.
func (c *Client) Receipts(ctx context.Context, q ReceiptQuery) ([]store.Receipt, error) {
	v := url.Values{}
	if q.Reason != "" {
		v.Set("reason", string(q.Reason))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	path := "/admin/v1/receipts"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out []store.Receipt
	err := c.do(ctx, http.MethodGet, path, nil, nil, &out)
	return out, err
}

// Receipt returns one receipt.
func (c *Client) Receipt(ctx context.Context, id string) (store.Receipt, error) {
	var out store.Receipt
	err := c.do(ctx, http.MethodGet, "/admin/v1/receipts/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Import sends an export file to the server, which verifies and
// publishes it.
func (c *Client) Import(ctx context.Context, r io.Reader, req ImportRequest) (ImportReport, error) {
	h := http.Header{"Content-Type": {"application/octet-stream"}}
	if req.Key != nil {
		h.Set(HeaderSealKey, base64.StdEncoding.EncodeToString(req.Key))
	}
	if req.Expect != nil {
		b, err := json.Marshal(IdentityOf(*req.Expect))
		if err != nil {
			return ImportReport{}, err
		}
		h.Set(HeaderExpectIdentity, string(b))
	}
	path := "/admin/v1/import"
	if name, ok := strings.CutPrefix(req.Source, "import:"); ok && name != "" {
		path += "?name=" + url.QueryEscape(name)
	}
	var out ImportReport
	err := c.do(ctx, http.MethodPost, path, r, h, &out)
	return out, err
}
