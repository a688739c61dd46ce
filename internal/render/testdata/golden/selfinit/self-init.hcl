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
