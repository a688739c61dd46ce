// Command barecopy is the floor of the backup benchmark: the plainest copy
// of a Raft snapshot to S3 there is. It streams GET sys/storage/raft/snapshot
// from one server into a multipart upload through the same client, part
// size and concurrency as the executor, and does nothing else: no login,
// no leader look-up, no check of the snapshot, no verification of the
// object. Like the executor it reports through the termination log: bytes,
// seconds from the request to the completed upload, and its peak memory.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
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

func run() error {
	addr := flag.String("addr", "", "OpenBao server URL")
	serverName := flag.String("server-name", "", "name in the server's certificate")
	caFile := flag.String("ca-file", "", "PEM CA of the server")
	tokenFile := flag.String("token-file", "", "file of a token that reads snapshots")
	endpoint := flag.String("endpoint", "", "S3 endpoint URL")
	bucket := flag.String("bucket", "", "bucket")
	key := flag.String("key", "", "object key")
	access := flag.String("access-key-file", "", "file of the access key")
	secret := flag.String("secret-key-file", "", "file of the secret key")
	partSize := flag.Uint64("part-size", 16<<20, "bytes per part")
	concurrency := flag.Uint("concurrency", 2, "parts at once")
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
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: *serverName}}}
	start := time.Now()
	req, err := http.NewRequest(http.MethodGet, *addr+"/v1/sys/storage/raft/snapshot", nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", read(*tokenFile))
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("snapshot: HTTP %d", resp.StatusCode)
	}
	u, err := url.Parse(*endpoint)
	if err != nil {
		return err
	}
	s3, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(read(*access), read(*secret), ""),
		Secure: u.Scheme == "https", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return err
	}
	info, err := s3.PutObject(context.Background(), *bucket, *key, resp.Body, -1, minio.PutObjectOptions{
		PartSize: *partSize, NumThreads: *concurrency, ConcurrentStreamParts: *concurrency > 1, DisableContentSha256: true,
	})
	if err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"size": info.Size, "seconds": time.Since(start).Seconds(),
		"peakRSSBytes": executor.PeakRSS(), "peakAnonBytes": peakAnon()})
	return os.WriteFile(*report, out, 0o644)
}
