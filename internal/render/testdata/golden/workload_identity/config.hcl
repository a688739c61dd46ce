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
    leader_api_addr       = "https://cloud-id-0.cloud-id-internal.team-c.svc:8200"
    leader_ca_cert_file   = "/etc/bao/tls/ca.crt"
    leader_tls_servername = "cloud-id.team-c.svc"
  }
}

seal "azurekeyvault" {
  key_name   = "unseal"
  tenant_id  = "00000000-0000-0000-0000-000000000000"
  vault_name = "openbao-unseal"
}

service_registration "kubernetes" {
}

telemetry {
  prometheus_retention_time = "24h"
  disable_hostname          = true
}
