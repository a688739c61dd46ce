ui         = false
log_level  = "info"
log_format = "standard"

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

  retry_join {
    auto_join             = "provider=k8s namespace=openbao-test label_selector=\"app.kubernetes.io/name=openbao,app.kubernetes.io/instance=openbao\""
    auto_join_scheme      = "https"
    auto_join_port        = 8200
    leader_ca_cert_file   = "/etc/bao/tls/ca.crt"
    leader_tls_servername = "openbao.openbao-test.svc"
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
