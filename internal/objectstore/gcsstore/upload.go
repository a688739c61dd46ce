package gcsstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openbao/operator/internal/objectstore"
)

// castagnoli is the polynomial of GCS's CRC32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// cancelTimeout bounds the DELETE of an abandoned session, which runs
// after the caller's context may have ended.
const cancelTimeout = 10 * time.Second

func encodeCRC32C(v uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, v))
}

func (s *store) Put(ctx context.Context, key string, r io.Reader) (objectstore.PutResult, error) {
	session, err := s.startUpload(ctx, key)
	if err != nil {
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	res, err := s.upload(ctx, session, r)
	if err != nil {
		// GCS keeps an unfinished session for a week without making an
		// object of it; cancel it so no part lingers either.
		s.cancelUpload(ctx, session)
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	return res, nil
}

// startUpload opens a resumable session and returns its URI. Trying
// again is safe: a session that is never used makes no object.
func (s *store) startUpload(ctx context.Context, key string) (string, error) {
	u := s.endpoint + "/upload/storage/v1/b/" + url.PathEscape(s.bucket) + "/o?" +
		url.Values{"uploadType": {"resumable"}, "name": {key}}.Encode()
	var session string
	err := retry(ctx, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"contentType":"application/octet-stream"}`))
		if err != nil {
			return fmt.Errorf("GCS request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json; charset=UTF-8")
		req.Header.Set("X-Upload-Content-Type", "application/octet-stream")
		resp, err := s.send(req)
		if err != nil {
			return err
		}
		session = resp.Header.Get("Location")
		return drain(resp)
	})
	if err == nil && session == "" {
		err = errors.New("GCS started an upload without a session URI")
	}
	return session, err
}

// upload streams r into the session one chunk at a time. Only when r
// has returned io.EOF is the last chunk, with the total size and the
// CRC32C, sent: any other end leaves the session unfinished.
func (s *store) upload(ctx context.Context, session string, r io.Reader) (objectstore.PutResult, error) {
	buf := make([]byte, s.chunkSize)
	sum := crc32.New(castagnoli)
	var offset int64
	for {
		n, err := io.ReadFull(r, buf)
		last := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !last {
			return objectstore.PutResult{}, fmt.Errorf("reading the stream: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return objectstore.PutResult{}, err
		}
		chunk := buf[:n]
		_, _ = sum.Write(chunk)
		c := chunkToSend{data: chunk, offset: offset, total: -1}
		if last {
			c.total, c.crc32c = offset+int64(n), encodeCRC32C(sum.Sum32())
		}
		if err := s.sendChunk(ctx, session, c); err != nil {
			return objectstore.PutResult{}, err
		}
		if last {
			return objectstore.PutResult{Size: c.total, Checksum: c.crc32c}, nil
		}
		offset += int64(n)
	}
}

// chunkToSend is a range of the object; total and crc32c are set on the
// last chunk only, which finishes the object.
type chunkToSend struct {
	data   []byte
	offset int64
	total  int64 // -1 until the last chunk
	crc32c string
}

func (c chunkToSend) last() bool { return c.total >= 0 }

// sendChunk sends a chunk until GCS holds all of it. GCS may keep fewer
// bytes than were sent, and a chunk that failed may have been kept in
// part: the rest is sent again from what GCS reports it holds.
func (s *store) sendChunk(ctx context.Context, session string, c chunkToSend) error {
	failures := 0
	for round := 0; round < 4*maxAttempts; round++ {
		st, err := s.putRange(ctx, session, c)
		if err != nil {
			if failures++; !retryable(err) || failures == maxAttempts {
				return err
			}
			if err := sleep(ctx, firstBackoff<<(failures-1)); err != nil {
				return err
			}
			if st, err = s.uploadStatus(ctx, session); err != nil {
				return err
			}
		}
		end := c.offset + int64(len(c.data))
		switch {
		case st.finished && c.last():
			return nil
		case st.finished:
			return errors.New("GCS finished the upload before its last chunk")
		case !c.last() && st.persisted >= end:
			return nil
		case st.persisted < c.offset || st.persisted > end:
			return fmt.Errorf("GCS holds %d bytes of the upload, outside the chunk %d-%d", st.persisted, c.offset, end)
		}
		c.data, c.offset = c.data[st.persisted-c.offset:], st.persisted
	}
	return errors.New("GCS keeps refusing part of a chunk")
}

// sessionStatus is what GCS holds of an upload.
type sessionStatus struct {
	persisted int64 // bytes GCS holds, from the start
	finished  bool  // the object exists
}

// putRange sends c with its Content-Range: "bytes a-b/*" for a chunk,
// "bytes a-b/total" (or "bytes */total" when empty) for the last one.
func (s *store) putRange(ctx context.Context, session string, c chunkToSend) (sessionStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, session, bytes.NewReader(c.data))
	if err != nil {
		return sessionStatus{}, fmt.Errorf("GCS request: %w", err)
	}
	total := "*"
	if c.last() {
		total = strconv.FormatInt(c.total, 10)
		// GCS refuses to finish an object whose bytes do not match.
		req.Header.Set("X-Goog-Hash", "crc32c="+c.crc32c)
	}
	if len(c.data) == 0 {
		req.Header.Set("Content-Range", "bytes */"+total)
	} else {
		req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%s", c.offset, c.offset+int64(len(c.data))-1, total))
	}
	return s.sessionRequest(req)
}

// uploadStatus asks GCS what it holds of an upload.
func (s *store) uploadStatus(ctx context.Context, session string) (sessionStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, session, http.NoBody)
	if err != nil {
		return sessionStatus{}, fmt.Errorf("GCS request: %w", err)
	}
	req.Header.Set("Content-Range", "bytes */*")
	return s.sessionRequest(req)
}

// sessionRequest sends a request to an upload session: 308 (Resume
// Incomplete) reports the bytes held in its Range header, "bytes=0-N",
// absent while none are; 200 or 201 says the object exists.
func (s *store) sessionRequest(req *http.Request) (sessionStatus, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return sessionStatus{}, withoutQuery(err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated:
		return sessionStatus{finished: true}, drain(resp)
	case http.StatusPermanentRedirect:
		st, err := parseRange(resp.Header.Get("Range"))
		_ = drain(resp)
		return st, err
	default:
		return sessionStatus{}, responseError(resp)
	}
}

func parseRange(h string) (sessionStatus, error) {
	if h == "" {
		return sessionStatus{}, nil
	}
	last, ok := strings.CutPrefix(h, "bytes=0-")
	n, err := strconv.ParseInt(last, 10, 64)
	if !ok || err != nil {
		return sessionStatus{}, fmt.Errorf("GCS upload status: Range %q", h)
	}
	return sessionStatus{persisted: n + 1}, nil
}

// cancelUpload deletes an unfinished session, even when ctx has ended;
// GCS answers 499. It is best effort: a session left behind expires
// after a week and never becomes an object.
func (s *store) cancelUpload(ctx context.Context, session string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodDelete, session, nil)
	if err != nil {
		return
	}
	if resp, err := s.client.Do(req); err == nil {
		_ = drain(resp)
	}
}
