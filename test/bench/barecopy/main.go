// Command barecopy is the floor of the backup and restore benchmarks: the
// plainest copy of a Raft snapshot between OpenBao and S3 there is.
//
// By default it streams GET sys/storage/raft/snapshot from one server into
// a multipart upload through the same client, part size and concurrency as
// the backup executor. With --restore it streams the object through the
// same client's GET into POST sys/storage/raft/snapshot, sent in chunks as
// the restore executor sends it. Either way it does nothing else: no login,
// no leader look-up, no check of the snapshot, no verification. Like the
// executor it reports through the termination log: bytes, seconds from the
// first request to the end of the copy, and its peak memory.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/openbao/operator/internal/executor"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "barecopy:", err)
		os.Exit(1)
	}
}

// copier holds what both directions use.
type copier struct {
	addr, token, bucket, key string
	bao                      *http.Client
	s3                       *minio.Client
}

func run() error {
	addr := flag.String("addr", "", "OpenBao server URL")
	serverName := flag.String("server-name", "", "name in the server's certificate")
	caFile := flag.String("ca-file", "", "PEM CA of the server")
	tokenFile := flag.String("token-file", "", "file of a token that reads (or, with --restore, installs) snapshots")
	endpoint := flag.String("endpoint", "", "S3 endpoint URL")
	bucket := flag.String("bucket", "", "bucket")
	key := flag.String("key", "", "object key")
	access := flag.String("access-key-file", "", "file of the access key")
	secret := flag.String("secret-key-file", "", "file of the secret key")
	partSize := flag.Uint64("part-size", 16<<20, "bytes per part")
	concurrency := flag.Uint("concurrency", 2, "parts at once")
	restore := flag.Bool("restore", false, "post the object to the server instead of uploading its snapshot")
	report := flag.String("termination-log", "/dev/termination-log", "file of the JSON report")
	flag.Parse()
	peakAnon := executor.SamplePeak(executor.AnonRSS, 50*time.Millisecond)
	read := func(p string) string { b, _ := os.ReadFile(p); return strings.TrimSpace(string(b)) }
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	u, err := url.Parse(*endpoint)
	if err != nil {
		return err
	}
	s3, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(read(*access), read(*secret), ""),
		Secure: u.Scheme == "https", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return err
	}
	c := copier{addr: *addr, token: read(*tokenFile), bucket: *bucket, key: *key, s3: s3,
		bao: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: *serverName}}}}
	start := time.Now()
	var size int64
	if *restore {
		size, err = c.restore()
	} else {
		size, err = c.backup(*partSize, *concurrency)
	}
	if err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"size": size, "seconds": time.Since(start).Seconds(),
		"peakRSSBytes": executor.PeakRSS(), "peakAnonBytes": peakAnon()})
	return os.WriteFile(*report, out, 0o644)
}

// backup streams the server's snapshot into a multipart upload.
func (c copier) backup(partSize uint64, concurrency uint) (int64, error) {
	req, err := http.NewRequest(http.MethodGet, c.addr+"/v1/sys/storage/raft/snapshot", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Vault-Token", c.token)
	resp, err := c.bao.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("snapshot: HTTP %d", resp.StatusCode)
	}
	info, err := c.s3.PutObject(context.Background(), c.bucket, c.key, resp.Body, -1, minio.PutObjectOptions{
		PartSize: partSize, NumThreads: concurrency, ConcurrentStreamParts: concurrency > 1, DisableContentSha256: true,
	})
	return info.Size, err
}

// restore streams the object into the server; the body hides its length,
// so that it goes in chunks as the executor's does.
func (c copier) restore() (int64, error) {
	obj, err := c.s3.GetObject(context.Background(), c.bucket, c.key, minio.GetObjectOptions{})
	if err != nil {
		return 0, err
	}
	defer obj.Close()
	body := &counter{r: obj}
	req, err := http.NewRequest(http.MethodPost, c.addr+"/v1/sys/storage/raft/snapshot", io.NopCloser(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Vault-Token", c.token)
	resp, err := c.bao.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return 0, fmt.Errorf("restore: HTTP %d %s", resp.StatusCode, msg)
	}
	return body.n, nil
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
