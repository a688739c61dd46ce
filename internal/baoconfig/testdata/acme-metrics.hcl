ui         = false
log_level  = "info"
log_format = "json"

listener "tcp" {
  address                         = ":8200"
  cluster_address                 = ":8201"
  tls_min_version                 = "tls12"
  tls_acme_ca_directory           = "https://acme.example.com/directory"
  tls_acme_ca_root                = "/etc/bao/acme-ca/ca.crt"
  tls_acme_domains                = ["bao.example.com"]
  tls_acme_email                  = "ops@example.com"
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

listener "tcp" {
  address         = ":8204"
  cluster_address = "127.0.0.1:8205"
  tls_min_version = "tls12"
  tls_cert_file   = "/etc/bao/tls/tls.crt"
  tls_key_file    = "/etc/bao/tls/tls.key"
  telemetry {
    unauthenticated_metrics_access = true
  }
}

storage "raft" {
  path                         = "/bao/data"
  performance_multiplier       = 1
  autopilot_reconcile_interval = "1s"
  autopilot_update_interval    = "1s"

  retry_join {
    leader_api_addr       = "https://bao-0.bao-internal.vault.svc:8202"
    leader_ca_cert_file   = "/etc/bao/tls/ca.crt"
    leader_tls_servername = "bao.vault.svc"
  }
}

seal "static" {
  current_key_id = "bao-unseal-1"
  current_key    = "file:///etc/bao/unseal/key"
}

service_registration "kubernetes" {
}

telemetry {
  prometheus_retention_time = "24h"
  disable_hostname          = true
}
