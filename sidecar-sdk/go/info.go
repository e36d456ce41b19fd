package kplug

import (
	"fmt"
	"strings"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// GroupKind names a Kubernetes kind independently of its version, e.g.
// GroupKind{Group: "myorg.org", Kind: "DatabaseTable"}. Group is empty for
// the core group.
type GroupKind struct {
	Group string
	Kind  string
}

// Offer is one implementation the plugin provides for one base kind.
type Offer struct {
	// Base is the kind this offer reconciles, e.g. myorg.org/DatabaseTable.
	Base GroupKind
	// Implementation is the name users put in spec.preferredImplementation
	// and the operator records in status.implementation, e.g. "PostgreSQL".
	Implementation string
	// Extensions are the extension kinds the plugin understands for this
	// base; only extensions of these kinds are sent to it.
	Extensions []GroupKind
	// Children are the kinds of the Kubernetes objects this implementation
	// manages for each base object, e.g.
	// FromAPIVersionAndKind("apps/v1", "Deployment"). Declaring one makes
	// the plugin advertise the CHILDREN capability: its Reconcile and
	// Finalize answers may then carry the desired children
	// ([Response.WithChild]) and its requests carry the observed ones
	// ([Request.Children]). The operator applies only the kinds its
	// --child-kinds allows, and sends and reads them in this version.
	Children []GroupVersionKind
}

// GroupVersionKind names a Kubernetes kind in one version, e.g.
// GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}.
// Group is empty for the core group.
type GroupVersionKind struct {
	Group   string
	Version string
	Kind    string
}

// FromAPIVersionAndKind is the kind named by an apiVersion ("apps/v1", or
// "v1" for the core group) and a kind, as objects spell them, e.g.
// FromAPIVersionAndKind("v1", "ConfigMap").
func FromAPIVersionAndKind(apiVersion, kind string) GroupVersionKind {
	// The core group's apiVersion has no '/': it is the version alone.
	slash := strings.LastIndexByte(apiVersion, '/')
	return GroupVersionKind{Group: apiVersion[:max(slash, 0)], Version: apiVersion[slash+1:], Kind: kind}
}

// APIVersion is "group/version", or the version alone for the core group.
func (gvk GroupVersionKind) APIVersion() string {
	if gvk.Group == "" {
		return gvk.Version
	}
	return gvk.Group + "/" + gvk.Version
}

// Info describes a plugin. It is sent in every heartbeat and answered by
// GetInfo, hooks, call policies and mutations included, so the two always
// agree. (Its capabilities follow from the interfaces the plugin
// implements: [Finalizer], [Validator], [Defaulter], [HookHandler],
// [Mutator]; and CHILDREN from the child kinds of its offers,
// [Offer.Children].)
type Info struct {
	// Name is a DNS label (lowercase letters, digits and '-', at most 63
	// characters), stable across versions and restarts, e.g. "postgresql".
	// The plugin serves on <socket dir>/plugins/<Name>/plugin.sock.
	Name string
	// Version is free-form; semver is recommended, e.g. "1.4.2".
	Version string
	// Description is one line for humans, shown in logs and Events.
	Description string
	// Offers lists what the plugin serves.
	Offers []Offer
	// Hooks are the hooks the plugin declares; the plugin must implement
	// [HookHandler]. Checked at start-up as the operator checks them
	// (DNS-label names, unique; a base kind; a known phase and behaviour;
	// at most 16).
	Hooks []Hook
	// CallPolicies ask for a deadline (and, for Validate and Default, a
	// failure policy) per call: one policy per call, checked at start-up.
	CallPolicies []CallPolicy
	// Mutations are the kinds of objects the plugin patches before the
	// operator applies them, e.g.
	// FromAPIVersionAndKind("apps/v1", "Deployment"); the plugin must
	// implement [Mutator], which advertises the MUTATE capability. At most
	// 16, checked at start-up. The operator sends only the kinds its
	// --mutators allows for the plugin.
	Mutations []GroupVersionKind
}

// validateName refuses names the operator would refuse.
func validateName(name string) error {
	valid := len(name) > 0 && len(name) <= maxNameLength &&
		name[0] != '-' && name[len(name)-1] != '-'
	for i := 0; valid && i < len(name); i++ {
		c := name[i]
		valid = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if valid {
		return nil
	}
	return &startupError{kind: ErrInvalidName, message: fmt.Sprintf(
		"invalid plugin name %q: it must be a DNS label (lowercase letters, digits and '-', "+
			"starting and ending with a letter or digit, at most %d characters), e.g. \"postgresql\"",
		name, maxNameLength)}
}

func (gk GroupKind) proto() *kplugv1.GroupKind {
	return &kplugv1.GroupKind{Group: gk.Group, Kind: gk.Kind}
}

func (gvk GroupVersionKind) proto() *kplugv1.GroupVersionKind {
	return &kplugv1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}

func (i *Info) offersProto() []*kplugv1.Offer {
	offers := make([]*kplugv1.Offer, 0, len(i.Offers))
	for _, o := range i.Offers {
		extensions := make([]*kplugv1.GroupKind, 0, len(o.Extensions))
		for _, e := range o.Extensions {
			extensions = append(extensions, e.proto())
		}
		children := make([]*kplugv1.GroupVersionKind, 0, len(o.Children))
		for _, c := range o.Children {
			children = append(children, c.proto())
		}
		offers = append(offers, &kplugv1.Offer{
			Base:           o.Base.proto(),
			Implementation: o.Implementation,
			Extensions:     extensions,
			Children:       children,
		})
	}
	return offers
}

// declaresChildren tells whether an offer declares child kinds.
func (i *Info) declaresChildren() bool {
	for _, o := range i.Offers {
		if len(o.Children) > 0 {
			return true
		}
	}
	return false
}

// capabilities: RECONCILE always; FINALIZE, VALIDATE, DEFAULT and HOOKS
// when the plugin implements [Finalizer], [Validator], [Defaulter] and
// [HookHandler], CHILDREN when an offer of info declares child kinds, and
// MUTATE when it implements [Mutator], in that order (as every SDK sends
// them).
func capabilities(plugin Plugin, info *Info) []kplugv1.Capability {
	caps := []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE}
	if _, ok := plugin.(Finalizer); ok {
		caps = append(caps, kplugv1.Capability_CAPABILITY_FINALIZE)
	}
	if _, ok := plugin.(Validator); ok {
		caps = append(caps, kplugv1.Capability_CAPABILITY_VALIDATE)
	}
	if _, ok := plugin.(Defaulter); ok {
		caps = append(caps, kplugv1.Capability_CAPABILITY_DEFAULT)
	}
	if _, ok := plugin.(HookHandler); ok {
		caps = append(caps, kplugv1.Capability_CAPABILITY_HOOKS)
	}
	if info.declaresChildren() {
		caps = append(caps, kplugv1.Capability_CAPABILITY_CHILDREN)
	}
	if _, ok := plugin.(Mutator); ok {
		caps = append(caps, kplugv1.Capability_CAPABILITY_MUTATE)
	}
	return caps
}
