/*
Copyright 2026 The spire-registrar Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes an explanation as indented JSON: the structure of Pod or ClusterSPIFFEID.
func WriteJSON(w io.Writer, explanation any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(explanation)
}

// WritePodText writes a pod's explanation for people: the pod, a table of ClusterSPIFFEIDs,
// the rendered entries with their SPIRE state, and the summary.
func WritePodText(out io.Writer, p *Pod) error {
	var text bytes.Buffer
	if err := writePodText(&text, p); err != nil {
		return err
	}
	return writeTrimmed(out, &text)
}

func writePodText(w io.Writer, p *Pod) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Pod:\t%s (uid %s)\n", p.Pod, p.UID)
	fmt.Fprintf(tw, "Node:\t%s\n", orNone(p.Node))
	fmt.Fprintf(tw, "Phase:\t%s\n", orNone(p.Phase))
	fmt.Fprintf(tw, "Controller:\tclassName %q, trustDomain %s, clusterName %s\n", p.Config.ClassName, p.Config.TrustDomain, p.Config.ClusterName)
	if !p.Eligible {
		fmt.Fprintf(tw, "Eligible:\tno, %s: %s\n", p.Reason, p.Message)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(tw, "Note:\t%s\n", n)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nClusterSPIFFEIDs:\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  NAME\tSELECTS\tREASON\tDETAIL\n")
	for _, v := range p.ClusterSPIFFEIDs {
		name := v.Name
		if v.Fallback {
			name += " (fallback)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", name, yesNo(v.Selects), v.Reason, oneLine(v.Message))
	}
	if len(p.ClusterSPIFFEIDs) == 0 {
		fmt.Fprintf(tw, "  (none in the cluster)\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nEntries:\n")
	if len(p.Entries) == 0 {
		fmt.Fprintf(w, "  (none rendered)\n")
	}
	for _, e := range p.Entries {
		fmt.Fprintf(w, "  %s  from %s\n", e.Entry.SPIFFEID, e.ClusterSPIFFEID)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		writeEntryFields(tw, "    ", e.Entry)
		switch e.State {
		case StateMasked:
			fmt.Fprintf(tw, "    SPIRE:\tnot written: masked by %s, which declares the same entry and is older\n", e.MaskedBy)
		case StateMissing:
			fmt.Fprintf(tw, "    SPIRE:\tMISSING: SPIRE holds no such entry\n")
		case StateInSync:
			fmt.Fprintf(tw, "    SPIRE:\tin sync (entry %s)\n", e.SPIREEntryID)
		case StateOutdated:
			fmt.Fprintf(tw, "    SPIRE:\tOUTDATED (entry %s)\n", e.SPIREEntryID)
			for _, d := range e.Diff {
				fmt.Fprintf(tw, "      %s:\tSPIRE %s\trendered %s\n", d.Field, d.SPIRE, d.Rendered)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	writeEntryList(w, "Stale SPIRE entries (declared by nothing; the controller removes them):", p.StaleSPIREEntries)
	writeEntryList(w, "SPIRE entries of the pod not owned by this controller (another entryIDPrefix):", p.ForeignSPIREEntries)
	fmt.Fprintf(w, "\nSummary: %s\n", p.Summary)
	return nil
}

// writeTrimmed copies text without the trailing blanks tabwriter pads empty cells with.
func writeTrimmed(out io.Writer, text *bytes.Buffer) error {
	var trimmed strings.Builder
	for line := range strings.Lines(text.String()) {
		trimmed.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	_, err := io.WriteString(out, trimmed.String())
	return err
}

func writeEntryList(w io.Writer, title string, entries []Entry) {
	if len(entries) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n", title)
	for _, e := range entries {
		fmt.Fprintf(w, "  %s  (entry %s)\n", e.SPIFFEID, e.ID)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		writeEntryFields(tw, "    ", e)
		_ = tw.Flush()
	}
}

func writeEntryFields(tw io.Writer, indent string, e Entry) {
	fmt.Fprintf(tw, "%sparentID:\t%s\n", indent, e.ParentID)
	fmt.Fprintf(tw, "%sselectors:\t%s\n", indent, strings.Join(e.Selectors, ", "))
	if len(e.DNSNames) > 0 {
		fmt.Fprintf(tw, "%sdnsNames:\t%s\n", indent, strings.Join(e.DNSNames, ", "))
	}
	if len(e.FederatesWith) > 0 {
		fmt.Fprintf(tw, "%sfederatesWith:\t%s\n", indent, strings.Join(e.FederatesWith, ", "))
	}
	if e.X509SVIDTTL != 0 || e.JWTSVIDTTL != 0 {
		fmt.Fprintf(tw, "%sttl:\tx509 %ds, jwt %ds\n", indent, e.X509SVIDTTL, e.JWTSVIDTTL)
	}
	if e.Admin || e.Downstream {
		fmt.Fprintf(tw, "%sadmin/downstream:\t%t/%t\n", indent, e.Admin, e.Downstream)
	}
	if e.Hint != "" {
		fmt.Fprintf(tw, "%shint:\t%s\n", indent, e.Hint)
	}
	if e.StoreSVID {
		fmt.Fprintf(tw, "%sstoreSvid:\ttrue\n", indent)
	}
}

// WriteClusterSPIFFEIDText writes a ClusterSPIFFEID's explanation for people.
func WriteClusterSPIFFEIDText(out io.Writer, c *ClusterSPIFFEID) error {
	var text bytes.Buffer
	if err := writeClusterSPIFFEIDText(&text, c); err != nil {
		return err
	}
	return writeTrimmed(out, &text)
}

func writeClusterSPIFFEIDText(w io.Writer, c *ClusterSPIFFEID) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ClusterSPIFFEID:\t%s\n", c.Name)
	fmt.Fprintf(tw, "Class:\t%q\n", c.ClassName)
	if c.Fallback {
		fmt.Fprintf(tw, "Fallback:\tyes\n")
	}
	if !c.Handled {
		fmt.Fprintf(tw, "Handled:\tno, %s: %s\n", c.Reason, c.Message)
	}
	if c.SpecError != "" {
		fmt.Fprintf(tw, "Spec error:\t%s\n", c.SpecError)
	}
	if c.Ready != nil {
		fmt.Fprintf(tw, "Ready:\t%s, %s: %s\n", c.Ready.Status, c.Ready.Reason, oneLine(c.Ready.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !c.Handled {
		return nil
	}
	fmt.Fprintf(w, "\nCounts:\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	s, o := c.Status, c.Observed
	fmt.Fprintf(tw, "  \tstatus.stats\tobserved now\t\n")
	row := func(name string, status any, observed int) {
		fmt.Fprintf(tw, "  %s\t%v\t%d\t\n", name, status, observed)
	}
	row("namespacesSelected", s.NamespacesSelected, o.NamespacesSelected)
	row("namespacesIgnored", s.NamespacesIgnored, o.NamespacesIgnored)
	row("podsSelected", s.PodsSelected, o.PodsSelected)
	row("podEntryRenderFailures", s.PodEntryRenderFailures, o.RenderFailed)
	row("entriesMasked", s.EntriesMasked, o.Masked)
	row("entriesToSet", s.EntriesToSet, o.Rendered)
	row("  in sync", "", o.InSync)
	row("  outdated", "", o.Outdated)
	row("  missing", "", o.Missing)
	row("  not scheduled", "", o.NotScheduled)
	row("fallback suppressed", "", o.FallbackSuppressed)
	row("finished pods", "", o.Finished)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nFailures:\n")
	if len(c.Failures) == 0 {
		_, err := fmt.Fprintf(w, "  (none)\n")
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  POD\tREASON\tDETAIL\n")
	for _, f := range c.Failures {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Pod, f.Reason, oneLine(f.Message))
	}
	if c.MoreFailures > 0 {
		fmt.Fprintf(tw, "  (%d more)\t\t\n", c.MoreFailures)
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// WritePodCertificatesText writes the explanations of a pod's certificates, or of one
// request, for people: for each, its volume and signer, the request and its state, the
// certificate's identity, the identity the signer gives the pod now, and the summary.
func WritePodCertificatesText(out io.Writer, answers []*PodCertificate) error {
	var text bytes.Buffer
	for i, p := range answers {
		if i > 0 {
			fmt.Fprintln(&text)
		}
		tw := tabwriter.NewWriter(&text, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "Pod:\t%s\n", p.Pod)
		if p.Volume != "" {
			fmt.Fprintf(tw, "Volume:\t%s\n", p.Volume)
		}
		fmt.Fprintf(tw, "Signer:\t%s\n", p.SignerName)
		fmt.Fprintf(tw, "Request:\t%s\n", orNone(p.Request))
		state := p.State
		if p.Reason != "" {
			state += ", " + p.Reason
		}
		if p.Message != "" {
			state += ": " + oneLine(p.Message)
		}
		fmt.Fprintf(tw, "State:\t%s\n", state)
		if c := p.Certificate; c != nil {
			fmt.Fprintf(tw, "Certificate:\t%s, DNS names %v, until %s, ClusterSPIFFEID %s\n", c.SPIFFEID, c.DNSNames, c.NotAfter, orNone(c.ClusterSPIFFEID))
		}
		switch {
		case p.Identity != nil:
			fmt.Fprintf(tw, "Identity now:\t%s, DNS names %v, from ClusterSPIFFEID %s\n", p.Identity.SPIFFEID, p.Identity.DNSNames, p.Identity.ClusterSPIFFEID)
		case p.IdentityProblem != "":
			fmt.Fprintf(tw, "Identity now:\tnone, %s\n", p.IdentityProblem)
		}
		for _, n := range p.Notes {
			fmt.Fprintf(tw, "Note:\t%s\n", n)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(&text, "\n%s\n", p.Summary)
	}
	return writeTrimmed(out, &text)
}
