// Package azurestore is the objectstore.Store of Azure Blob Storage, over
// the azblob SDK: block blobs in one container.
//
// Put stages fixed-size blocks, a few at once, each with its MD5, which
// the service checks on receipt; it commits the block list only once the
// stream has ended, so a stream that fails leaves no blob. (The blocks it
// staged stay uncommitted, invisible, until Azure discards them after a
// week; a blob cannot exist without a commit.) The commit sets the blob's
// Content-MD5 to the MD5 of every byte sent, which Stat reads back: Azure
// does not compute a whole-blob MD5 of a block list itself, so the
// service-checked blocks, committed in the order sent, are what tie the
// stored bytes to that checksum.
package azurestore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/openbao/operator/internal/objectstore"
)

// DefaultBlockSize gives a largest blob of about 390 GiB (50,000 blocks).
const DefaultBlockSize = 8 << 20

type store struct {
	container   *container.Client
	blockSize   int
	concurrency int
	// sasToken is redacted from errors, which may quote a request's URL.
	sasToken string
}

// New returns the Store of one container. It makes no request. Azure needs
// static credentials: the account name with a shared key or a SAS token;
// it never uses the pod's ambient identity, with cfg.AmbientIdentity set
// or not.
func New(cfg objectstore.Config) (objectstore.Store, error) {
	c := cfg.Credentials
	if c == nil {
		return nil, fmt.Errorf("Azure container %q: %w", cfg.Bucket, objectstore.ErrNoCredentials)
	}
	if c.AccountName == "" || (c.AccountKey.IsZero() && c.SASToken.IsZero()) {
		return nil, errors.New("azure credentials: want accountName and either accountKey or sasToken")
	}
	containerURL, err := containerURL(cfg)
	if err != nil {
		return nil, err
	}
	transport, err := objectstore.NewHTTPTransport(cfg.CAPEM)
	if err != nil {
		return nil, err
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: transport}}}
	s := &store{blockSize: int(cfg.PartSize), concurrency: max(cfg.Concurrency, 1), sasToken: c.SASToken.Reveal()}
	if s.blockSize <= 0 {
		s.blockSize = DefaultBlockSize
	}
	if !c.AccountKey.IsZero() {
		cred, err := container.NewSharedKeyCredential(c.AccountName, c.AccountKey.Reveal())
		if err != nil {
			// The SDK's message may quote the key: say only what failed.
			return nil, errors.New("azure credentials: accountKey is not valid base64")
		}
		s.container, err = container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
		if err != nil {
			return nil, fmt.Errorf("azure client: %w", err)
		}
		return s, nil
	}
	s.container, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(c.SASToken.Reveal(), "?"), opts)
	if err != nil {
		return nil, errors.New("azure client: the SAS token does not make a valid URL")
	}
	return s, nil
}

// containerURL is https://<account>.blob.core.windows.net/<container>
// unless an endpoint is set; path style puts the account in the path, as
// Azurite and some private endpoints want.
func containerURL(cfg objectstore.Config) (string, error) {
	account := cfg.Credentials.AccountName
	if cfg.Endpoint == "" {
		return "https://" + account + ".blob.core.windows.net/" + cfg.Bucket, nil
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("object store endpoint %q: want https://host[:port] or http://host[:port]", cfg.Endpoint)
	}
	base := strings.TrimSuffix(cfg.Endpoint, "/")
	if cfg.PathStyle {
		base += "/" + url.PathEscape(account)
	}
	return base + "/" + cfg.Bucket, nil
}

func (s *store) Put(ctx context.Context, key string, r io.Reader) (objectstore.PutResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := s.container.NewBlockBlobClient(key)
	up := &upload{client: client, cancel: cancel, buffers: make(chan []byte, s.concurrency)}
	for range s.concurrency {
		up.buffers <- nil // allocated on first use: a small snapshot takes one block
	}
	ids, size, sum, err := up.stageAll(ctx, r, s.blockSize)
	if err != nil {
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	_, err = client.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentMD5: sum, BlobContentType: ptr("application/octet-stream")},
	})
	if err != nil {
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	return objectstore.PutResult{Size: size, Checksum: base64.StdEncoding.EncodeToString(sum)}, nil
}

// upload stages the blocks of one Put, at most cap(buffers) at once.
type upload struct {
	client  *blockblob.Client
	cancel  context.CancelFunc
	buffers chan []byte
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
}

// stageAll reads r in blocks, staging each while the next is read, and
// returns the block IDs in order, the size and the MD5 of all bytes.
func (u *upload) stageAll(ctx context.Context, r io.Reader, blockSize int) ([]string, int64, []byte, error) {
	whole := md5.New()
	var ids []string
	var size int64
	for i := 0; ; i++ {
		var buf []byte
		select {
		case buf = <-u.buffers:
		case <-ctx.Done():
			u.setErr(ctx.Err())
		}
		if u.failed() {
			break
		}
		if buf == nil {
			buf = make([]byte, blockSize)
		}
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			whole.Write(buf[:n])
			size += int64(n)
			// Every block ID of a blob has the same length.
			id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%08d", i))
			ids = append(ids, id)
			u.wg.Add(1)
			go u.stage(ctx, id, buf, n)
		} else {
			u.buffers <- buf
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			u.setErr(err)
			break
		}
	}
	u.wg.Wait()
	if u.err != nil {
		return nil, 0, nil, u.err
	}
	return ids, size, whole.Sum(nil), nil
}

func (u *upload) stage(ctx context.Context, id string, buf []byte, n int) {
	defer u.wg.Done()
	sum := md5.Sum(buf[:n])
	_, err := u.client.StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(buf[:n])),
		&blockblob.StageBlockOptions{TransactionalValidation: blob.TransferValidationTypeMD5(sum[:])})
	if err != nil {
		u.setErr(err)
	}
	u.buffers <- buf
}

// setErr keeps the first failure and stops the other blocks.
func (u *upload) setErr(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		u.err = err
		u.cancel()
	}
}

func (u *upload) failed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err != nil
}

func ptr[T any](v T) *T { return &v }

func (s *store) Stat(ctx context.Context, key string) (objectstore.Object, error) {
	props, err := s.container.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			return objectstore.Object{}, fmt.Errorf("object store stat %s: %w", key, objectstore.ErrNotFound)
		}
		return objectstore.Object{}, s.fail("stat", key, err)
	}
	obj := objectstore.Object{Key: key}
	if props.ContentLength != nil {
		obj.Size = *props.ContentLength
	}
	if props.LastModified != nil {
		obj.LastModified = *props.LastModified
	}
	if len(props.ContentMD5) > 0 {
		obj.Checksum = base64.StdEncoding.EncodeToString(props.ContentMD5)
	}
	if props.ETag != nil {
		obj.Version = string(*props.ETag)
	}
	return obj, nil
}

// OpenVersion reads the blob only while its ETag is the one Stat
// returned: a replaced blob fails the condition.
func (s *store) OpenVersion(ctx context.Context, key, version string) (io.ReadCloser, error) {
	if version == "" {
		return nil, &objectstore.Error{Op: "get", Key: key, Permanent: true, Err: errors.New("no version to read")}
	}
	etag := azcore.ETag(version)
	resp, err := s.container.NewBlobClient(key).DownloadStream(ctx, &blob.DownloadStreamOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}})
	if err != nil {
		if bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobNotFound) {
			return nil, fmt.Errorf("object store get %s: %w", key, objectstore.ErrVersionChanged)
		}
		return nil, s.fail("get", key, err)
	}
	return objectstore.Download(resp.Body, func(err error) error { return s.fail("get", key, err) }), nil
}

func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	resp, err := s.container.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return objectstore.Download(resp.Body, func(err error) error { return s.fail("get", key, err) }), nil
}

func (s *store) List(ctx context.Context, prefix string) ([]objectstore.Object, error) {
	var out []objectstore.Object
	pager := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, s.fail("list", prefix, err)
		}
		for _, item := range page.Segment.BlobItems {
			if item.Name == nil || item.Properties == nil {
				continue
			}
			obj := objectstore.Object{Key: *item.Name}
			if item.Properties.ContentLength != nil {
				obj.Size = *item.Properties.ContentLength
			}
			if item.Properties.LastModified != nil {
				obj.LastModified = *item.Properties.LastModified
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

func (s *store) Delete(ctx context.Context, key string) error {
	_, err := s.container.NewBlobClient(key).Delete(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return s.fail("delete", key, err)
	}
	return nil
}
