initialize "enable_userpass" {
  request "enable_userpass" {
    operation = "update"
    path      = "sys/auth/userpass"
    data {
      description = "admins"
      type        = "userpass"
    }
  }
}

initialize "admin-user" {
  request "admin-user" {
    operation = "update"
    path      = "auth/userpass/users/admin"
    data {
      password {
        env_var     = "BAO_ADMIN_PASSWORD"
        eval_source = "env"
        eval_type   = "string"
      }
      token_policies = ["admin"]
    }
  }
}

initialize "kv" {
  request "kv" {
    operation     = "update"
    path          = "sys/mounts/secret"
    allow_failure = true
    data {
      options {
        version = 2
      }
      type = "kv"
    }
  }
}
