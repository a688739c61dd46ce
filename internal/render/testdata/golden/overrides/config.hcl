ui         = false
log_level  = "debug"
log_format = "json"

listener "tcp" {
  address         = ":8200"
  cluster_address = ":8201"
  tls_min_version = "tls13"
  tls_cert_file   = "/etc/bao/tls/tls.crt"
  tls_key_file    = "/etc/bao/tls/tls.key"
  telemetry {
    unauthenticated_metrics_access = true
  }
}

listener "tcp" {
  address         = ":8204"
  cluster_address = "127.0.0.1:8205"
  tls_min_version = "tls13"
  tls_cert_file   = "/etc/bao/tls/tls.crt"
  tls_key_file    = "/etc/bao/tls/tls.key"
  telemetry {
    unauthenticated_metrics_access = true
  }
}

storage "raft" {
  path                         = "/bao/data"
  performance_multiplier       = 1
  autopilot_reconcile_interval = "5s"
  autopilot_update_interval    = "1s"

  retry_join {
    leader_api_addr       = "https://tuned-0.tuned-internal.team-a.svc:8200"
    leader_ca_cert_file   = "/etc/bao/tls/ca.crt"
    leader_tls_servername = "tuned.team-a.svc"
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

cluster_name                = "team-a"
default_lease_ttl           = "768h"
disable_performance_standby = true
max_lease_ttl               = "8760h"
