initialize "enable-kubernetes-auth" {
  request "enable-kubernetes-auth" {
    operation = "update"
    path      = "sys/auth/kubernetes"
    data {
      type = "kubernetes"
    }
  }
}

initialize "configure-kubernetes-auth" {
  request "configure-kubernetes-auth" {
    operation = "update"
    path      = "auth/kubernetes/config"
    data {
      kubernetes_host = "https://kubernetes.default.svc"
    }
  }
}

initialize "operator-autopilot" {
  request "operator-autopilot" {
    operation = "update"
    path      = "sys/storage/raft/autopilot/configuration"
    data {
      cleanup_dead_servers               = true
      dead_server_last_contact_threshold = "300s"
      min_quorum                         = 3
      server_stabilization_time          = "10s"
    }
  }
}

initialize "operator-auth-enable" {
  request "operator-auth-enable" {
    operation = "update"
    path      = "sys/auth/openbao-operator"
    data {
      description = "the OpenBao operator's own identity (rollouts, backups)"
      type        = "jwt"
    }
  }
}

initialize "operator-canary-mount" {
  request "operator-canary-mount" {
    operation = "update"
    path      = "sys/mounts/openbao-operator"
    data {
      description = "the OpenBao operator's backup canary"
      options {
        version = "1"
      }
      type = "kv"
    }
  }
}

initialize "operator-auth-config" {
  request "operator-auth-config" {
    operation = "update"
    path      = "auth/openbao-operator/config"
    data {
      bound_issuer           = "https://kubernetes.default.svc.cluster.local"
      jwt_validation_pubkeys = ["-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEfgmQYctP/zoqvrqIK9TTBPC4bm2a\nxs0cHU2aas8CPNTu8V7HKZyVV4ItoQo0DslsBpmcgAgxN3zoxKWDRVaFnQ==\n-----END PUBLIC KEY-----\n"]
    }
  }
}

initialize "operator-upgrade-policy" {
  request "operator-upgrade-policy" {
    operation = "update"
    path      = "sys/policies/acl/openbao-operator-upgrade"
    data {
      policy = "path \"sys/step-down\" { capabilities = [\"update\", \"sudo\"] }\npath \"sys/storage/raft/configuration\" { capabilities = [\"read\"] }\npath \"sys/storage/raft/autopilot/state\" { capabilities = [\"read\"] }\npath \"sys/storage/raft/autopilot/configuration\" { capabilities = [\"read\", \"update\"] }\npath \"sys/storage/raft/remove-peer\" { capabilities = [\"update\"] }\n"
    }
  }
}

initialize "operator-backup-policy" {
  request "operator-backup-policy" {
    operation = "update"
    path      = "sys/policies/acl/openbao-operator-backup"
    data {
      policy = "path \"sys/storage/raft/snapshot\" { capabilities = [\"read\"] }\npath \"openbao-operator/canary\" { capabilities = [\"create\", \"update\", \"read\"] }\npath \"auth/openbao-operator/role/drill\" {\n  capabilities = [\"update\"]\n  allowed_parameters = {\n    \"role_type\" = [\"jwt\"]\n    \"bound_audiences\" = [\"openbao-operator:openbao-test/openbao-selfinit:drill:*\"]\n  }\n}\n"
    }
  }
}

initialize "operator-restore-policy" {
  request "operator-restore-policy" {
    operation = "update"
    path      = "sys/policies/acl/openbao-operator-restore"
    data {
      policy = "path \"sys/storage/raft/snapshot\" { capabilities = [\"update\"] }\npath \"sys/storage/raft/snapshot-force\" { capabilities = [\"update\"] }\n"
    }
  }
}

initialize "operator-drill-policy" {
  request "operator-drill-policy" {
    operation = "update"
    path      = "sys/policies/acl/openbao-operator-drill"
    data {
      policy = "path \"openbao-operator/canary\" { capabilities = [\"read\"] }\npath \"sys/storage/raft/configuration\" { capabilities = [\"read\"] }\npath \"sys/storage/raft/autopilot/state\" { capabilities = [\"read\"] }\npath \"sys/storage/raft/autopilot/configuration\" { capabilities = [\"read\"] }\n"
    }
  }
}

initialize "operator-upgrade-role" {
  request "operator-upgrade-role" {
    operation = "update"
    path      = "auth/openbao-operator/role/upgrade"
    data {
      bound_audiences = ["openbao-operator:openbao-test/openbao-selfinit:upgrade"]
      bound_subject   = "system:serviceaccount:openbao-test:openbao-selfinit-upgrade-serviceaccount"
      role_type       = "jwt"
      token_max_ttl   = "3600s"
      token_policies  = ["openbao-operator-upgrade"]
      token_ttl       = "900s"
      token_type      = "service"
      user_claim      = "sub"
    }
  }
}

initialize "operator-backup-role" {
  request "operator-backup-role" {
    operation = "update"
    path      = "auth/openbao-operator/role/backup"
    data {
      bound_audiences = ["openbao-operator:openbao-test/openbao-selfinit:backup"]
      bound_subject   = "system:serviceaccount:openbao-test:openbao-selfinit-backup-serviceaccount"
      role_type       = "jwt"
      token_max_ttl   = "3600s"
      token_policies  = ["openbao-operator-backup"]
      token_ttl       = "900s"
      token_type      = "service"
      user_claim      = "sub"
    }
  }
}

initialize "operator-restore-role" {
  request "operator-restore-role" {
    operation = "update"
    path      = "auth/openbao-operator/role/restore"
    data {
      bound_audiences = ["openbao-operator:openbao-test/openbao-selfinit:restore"]
      bound_subject   = "system:serviceaccount:openbao-test:openbao-selfinit-restore-serviceaccount"
      role_type       = "jwt"
      token_max_ttl   = "3600s"
      token_policies  = ["openbao-operator-restore"]
      token_ttl       = "900s"
      token_type      = "service"
      user_claim      = "sub"
    }
  }
}

initialize "operator-drill-role" {
  request "operator-drill-role" {
    operation = "update"
    path      = "auth/openbao-operator/role/drill"
    data {
      bound_audiences = ["openbao-operator:openbao-test/openbao-selfinit:drill:idle"]
      bound_subject   = "system:serviceaccount:openbao-test:openbao-selfinit-drill-serviceaccount"
      role_type       = "jwt"
      token_max_ttl   = "3600s"
      token_policies  = ["openbao-operator-drill"]
      token_ttl       = "900s"
      token_type      = "service"
      user_claim      = "sub"
    }
  }
}
