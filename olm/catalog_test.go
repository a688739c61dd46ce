package olm_test

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// catalogDoc is the part of a file-based catalog's blobs the tests read.
type catalogDoc struct {
	Schema         string `json:"schema"`
	Name           string `json:"name"`
	Package        string `json:"package"`
	DefaultChannel string `json:"defaultChannel"`
	Entries        []struct {
		Name string `json:"name"`
	} `json:"entries"`
	Properties []struct {
		Type  string         `json:"type"`
		Value map[string]any `json:"value"`
	} `json:"properties"`
}

func readDocs[T any](t *testing.T, path string) []T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []T
	for _, raw := range bytes.Split(data, []byte("\n---\n")) {
		var doc T
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
	return docs
}

// TestCatalogListsTheBundle: the catalog's package, channel and bundle
// entry are those of bundle/, so OLM resolves the Subscription to it.
// (opm validate, run by make catalog-validate, checks the schema.)
func TestCatalogListsTheBundle(t *testing.T) {
	b := loadBundle(t)
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	readYAML(t, bundleDir+"/metadata/annotations.yaml", &annotations)
	pkg := annotations.Annotations["operators.operatorframework.io.bundle.package.v1"]
	channel := annotations.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]
	var sawPackage, sawChannel, sawBundle bool
	for _, doc := range readDocs[catalogDoc](t, "catalog/openbao-operator/catalog.yaml") {
		switch doc.Schema {
		case "olm.package":
			sawPackage = doc.Name == pkg && doc.DefaultChannel == channel
		case "olm.channel":
			sawChannel = doc.Package == pkg && doc.Name == channel && slices.ContainsFunc(doc.Entries, func(e struct {
				Name string `json:"name"`
			}) bool {
				return e.Name == b.CSV.Name
			})
		case "olm.bundle":
			sawBundle = doc.Name == b.CSV.Name && doc.Package == pkg
			checkBundleProperties(t, doc, b.CSV.Spec.Version.String())
			var kinds []string
			for _, p := range doc.Properties {
				if p.Type == "olm.gvk" {
					kinds = append(kinds, p.Value["kind"].(string))
				}
			}
			var owned []string
			for _, crd := range b.CSV.Spec.CustomResourceDefinitions.Owned {
				owned = append(owned, crd.Kind)
			}
			slices.Sort(kinds)
			slices.Sort(owned)
			if !slices.Equal(kinds, owned) {
				t.Errorf("the catalog's bundle provides %v, the CSV owns %v", kinds, owned)
			}
		}
	}
	if !sawPackage || !sawChannel || !sawBundle {
		t.Errorf("the catalog lacks package %s (default channel %s) %v, its channel listing %s %v, or the bundle %v",
			pkg, channel, sawPackage, b.CSV.Name, sawChannel, sawBundle)
	}
}

func checkBundleProperties(t *testing.T, doc catalogDoc, version string) {
	t.Helper()
	for _, p := range doc.Properties {
		if p.Type == "olm.package" && p.Value["version"] != version {
			t.Errorf("the catalog's bundle has version %v, the CSV %s", p.Value["version"], version)
		}
	}
}

// TestInstallSubscribesToTheCatalog: install.yaml's Subscription names the
// catalog's package and channel and its CatalogSource, and its
// OperatorGroup targets all namespaces (the file's default; its comment
// shows how to target some).
func TestInstallSubscribesToTheCatalog(t *testing.T) {
	type object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	byKind := map[string]object{}
	for _, o := range readDocs[object](t, "install.yaml") {
		byKind[o.Kind] = o
	}
	sub, source, group := byKind["Subscription"], byKind["CatalogSource"], byKind["OperatorGroup"]
	if sub.Spec["name"] != "openbao-operator" || sub.Spec["channel"] != "candidate" {
		t.Errorf("the Subscription names package %v channel %v", sub.Spec["name"], sub.Spec["channel"])
	}
	if sub.Spec["source"] != source.Metadata.Name || sub.Spec["sourceNamespace"] != source.Metadata.Namespace {
		t.Errorf("the Subscription's source %v/%v is not the CatalogSource %s/%s",
			sub.Spec["sourceNamespace"], sub.Spec["source"], source.Metadata.Namespace, source.Metadata.Name)
	}
	if group.Metadata.Namespace != sub.Metadata.Namespace || group.Spec["targetNamespaces"] != nil {
		t.Errorf("the OperatorGroup must sit beside the Subscription and target all namespaces: %+v", group)
	}
}
