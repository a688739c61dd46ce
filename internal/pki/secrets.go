package pki

// CASecretData lays out the CA Secret's data; the successor keys are present
// only while a successor is being published.
func CASecretData(m CAMaterial) map[string][]byte {
	data := map[string][]byte{CertKey: m.CertPEM, KeyKey: m.KeyPEM, CAKey: m.BundlePEM}
	if len(m.NextCertPEM) > 0 {
		data[NextCertKey] = m.NextCertPEM
		data[NextKeyKey] = m.NextKeyPEM
	}
	return data
}

// ServerSecretData lays out the server Secret's data.
func ServerSecretData(m ServerMaterial) map[string][]byte {
	return map[string][]byte{CertKey: m.CertPEM, KeyKey: m.KeyPEM, CAKey: m.BundlePEM}
}

// ObservedFromSecrets reads the two Secrets' data (either may be nil when the
// Secret does not exist).
func ObservedFromSecrets(caData, serverData map[string][]byte) Observed {
	return Observed{
		CA: CAMaterial{
			CertPEM: caData[CertKey], KeyPEM: caData[KeyKey], BundlePEM: caData[CAKey],
			NextCertPEM: caData[NextCertKey], NextKeyPEM: caData[NextKeyKey],
		},
		Server: ServerMaterial{
			CertPEM: serverData[CertKey], KeyPEM: serverData[KeyKey], BundlePEM: serverData[CAKey],
		},
	}
}
