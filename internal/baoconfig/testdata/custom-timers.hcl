ui         = false
log_level  = "info"
log_format = "json"

listener "tcp" {
  address         = ":8200"
  cluster_address = ":8201"
  tls_min_version = "tls12"
  tls_cert_file   = "/etc/bao/tls/tls.crt"
  tls_key_file    = "/etc/bao/tls/tls.key"
}

storage "raft" {
  path                         = "/bao/data"
  performance_multiplier       = 5
  autopilot_reconcile_interval = "10s"
  autopilot_update_interval    = "2s"

  retry_join {
    leader_api_addr     = "https://bao-0.bao-internal.vault.svc:8200"
    leader_ca_cert_file = "/etc/bao/tls/ca.crt"
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
