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
    leader_api_addr       = "https://openbao-prod-0.openbao-prod-internal.openbao-test.svc:8200"
    leader_ca_cert_file   = "/etc/bao/tls/ca.crt"
    leader_tls_servername = "openbao-prod.openbao-test.svc"
  }
}

seal "transit" {
  address     = "https://openbao-unsealer.openbao-system.svc:8200"
  key_name    = "openbao-prod"
  mount_path  = "transit/"
  tls_ca_cert = "/etc/bao/seal-creds/ca.crt"
}

service_registration "kubernetes" {
}

telemetry {
  prometheus_retention_time = "24h"
  disable_hostname          = true
}

audit {
  description = "every request and response, to the container log"
  options {
    file_path = "/dev/stdout"
  }
  path = "stdout"
  type = "file"
}

