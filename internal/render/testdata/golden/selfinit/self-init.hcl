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
