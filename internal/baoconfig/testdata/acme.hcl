ui         = false
log_level  = "info"
log_format = "json"

listener "tcp" {
  address               = ":8200"
  cluster_address       = ":8201"
  tls_min_version       = "tls12"
  tls_acme_ca_directory = "https://acme-v02.api.letsencrypt.org/directory"
  tls_acme_domains      = ["bao.example.com", "bao-0.bao-internal.vault.svc"]
  tls_acme_email        = "ops@example.com"
  tls_acme_cache_path   = "/bao/data/acme"
}

storage "raft" {
  path                         = "/bao/data"
  performance_multiplier       = 1
  autopilot_reconcile_interval = "1s"
  autopilot_update_interval    = "1s"

  retry_join {
    leader_api_addr = "https://bao-0.bao-internal.vault.svc:8200"
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
