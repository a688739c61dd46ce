ui         = false
log_level  = "info"
log_format = "standard"

listener "tcp" {
  address                         = ":8200"
  cluster_address                 = ":8201"
  tls_min_version                 = "tls12"
  tls_acme_ca_directory           = "https://acme-v02.api.letsencrypt.org/directory"
  tls_acme_domains                = ["openbao.example.com"]
  tls_acme_email                  = "platform@example.com"
  tls_acme_cache_path             = "/bao/data/acme"
  tls_acme_disable_http_challenge = true
}

listener "tcp" {
  address         = ":8202"
  cluster_address = "127.0.0.1:8203"
  tls_min_version = "tls12"
  tls_cert_file   = "/etc/bao/tls/tls.crt"
  tls_key_file    = "/etc/bao/tls/tls.key"
}

storage "raft" {
  path                         = "/bao/data"
  performance_multiplier       = 1
  autopilot_reconcile_interval = "1s"
  autopilot_update_interval    = "1s"

  retry_join {
    leader_api_addr       = "https://openbao-acme-0.openbao-acme-internal.openbao-test.svc:8202"
    leader_ca_cert_file   = "/etc/bao/tls/ca.crt"
    leader_tls_servername = "openbao-acme.openbao-test.svc"
  }
}

seal "static" {
  current_key_id = "operator-1"
  current_key    = "file:///etc/bao/unseal/key"
}

service_registration "kubernetes" {
}

telemetry {
  prometheus_retention_time = "24h"
  disable_hostname          = true
}
