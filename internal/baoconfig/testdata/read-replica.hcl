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
  performance_multiplier       = 1
  autopilot_reconcile_interval = "1s"
  autopilot_update_interval    = "1s"
  retry_join_as_non_voter      = true

  retry_join {
    auto_join             = "provider=k8s namespace=vault label_selector=\"app.kubernetes.io/instance=bao,openbao-initialized=true\""
    auto_join_scheme      = "https"
    auto_join_port        = 8200
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
