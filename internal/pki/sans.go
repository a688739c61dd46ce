package pki

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// SANs is the set of subject alternative names a server certificate carries,
// each list sorted and free of duplicates.
type SANs struct {
	DNSNames []string
	IPs      []net.IP
}

// DesiredSANs lists every name a client or Raft peer may use to reach the
// cluster: each pod's stable name under the headless Service (ordinals
// 0..Replicas-1) and both Services, the read replicas' likewise, in the short, namespaced, .svc and fully
// qualified forms, plus localhost, the loopback addresses and ExtraSANs.
func DesiredSANs(s Spec) SANs {
	domain := s.clusterDomain()
	forms := func(name string) []string {
		return []string{
			name,
			name + "." + s.Namespace,
			name + "." + s.Namespace + ".svc",
			name + "." + s.Namespace + ".svc." + domain,
		}
	}
	dns := []string{"localhost"}
	for i := int32(0); i < s.Replicas; i++ {
		pod := fmt.Sprintf("%s-%d.%s", s.ClusterName, i, s.HeadlessService)
		dns = append(dns, forms(pod)...)
	}
	for i := int32(0); i < s.Read.Replicas; i++ {
		pod := fmt.Sprintf("%s-%d.%s", s.Read.StatefulSet, i, s.Read.HeadlessService)
		dns = append(dns, forms(pod)...)
	}
	for _, svc := range []string{s.HeadlessService, s.ClientService, s.Read.HeadlessService, s.Read.Service} {
		if svc != "" {
			dns = append(dns, forms(svc)...)
		}
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	for _, extra := range s.ExtraSANs {
		extra = strings.TrimSpace(extra)
		if ip := net.ParseIP(extra); ip != nil {
			ips = append(ips, ip)
		} else if extra != "" {
			dns = append(dns, extra)
		}
	}
	return normalizeSANs(dns, ips)
}

// normalizeSANs lowercases, sorts and deduplicates, so that two SAN sets can
// be compared with Equal whatever order a certificate lists them in.
func normalizeSANs(dns []string, ips []net.IP) SANs {
	out := SANs{}
	for _, d := range dns {
		out.DNSNames = append(out.DNSNames, strings.ToLower(d))
	}
	slices.Sort(out.DNSNames)
	out.DNSNames = slices.Compact(out.DNSNames)
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		out.IPs = append(out.IPs, ip)
	}
	slices.SortFunc(out.IPs, func(a, b net.IP) int { return strings.Compare(string(a), string(b)) })
	out.IPs = slices.CompactFunc(out.IPs, net.IP.Equal)
	return out
}

// Equal reports whether both sets hold the same names.
func (a SANs) Equal(b SANs) bool {
	return slices.Equal(a.DNSNames, b.DNSNames) && slices.EqualFunc(a.IPs, b.IPs, net.IP.Equal)
}

// diff names what b adds to and removes from a, for a human message.
func (a SANs) diff(b SANs) string {
	var added, removed []string
	for _, d := range b.DNSNames {
		if !slices.Contains(a.DNSNames, d) {
			added = append(added, d)
		}
	}
	for _, d := range a.DNSNames {
		if !slices.Contains(b.DNSNames, d) {
			removed = append(removed, d)
		}
	}
	for _, ip := range b.IPs {
		if !slices.ContainsFunc(a.IPs, ip.Equal) {
			added = append(added, ip.String())
		}
	}
	for _, ip := range a.IPs {
		if !slices.ContainsFunc(b.IPs, ip.Equal) {
			removed = append(removed, ip.String())
		}
	}
	return fmt.Sprintf("added %s, removed %s", summarize(added), summarize(removed))
}

// summarize lists a few names and counts the rest, so that scaling a large
// cluster does not produce an event of hundreds of names.
func summarize(names []string) string {
	const shown = 4
	if len(names) == 0 {
		return "none"
	}
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
