package openbao_test

import (
	"encoding/pem"
	"net/http/httptest"
)

func caPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
