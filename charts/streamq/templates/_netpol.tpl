{{/*
The cloud metadata endpoints no query pod may reach, whatever networkPolicy allows:
AWS, GCP, Azure, OpenStack... serve instance credentials at 169.254.169.254 (AWS also at
fd00:ec2::254, its ECS and Pod Identity agents at 169.254.170.2 and .23, fd00:ec2::23;
Alibaba at 100.100.100.200): the link-local ranges whole, as contract.policy's
METADATA_HOSTS. Every egress peer of the queries' NetworkPolicy goes
through "streamq.guardPeers": an ipBlock that covers one of them gets it in `except`
(an `except` must lie inside its cidr, so only those it covers), an ipBlock inside
one of them is dropped, and a rule with no `to` (any destination) is given one that
means the same minus these addresses.
*/}}
{{- define "streamq.metadataCIDRs" -}}
169.254.0.0/16,100.100.100.200/32,fd00:ec2::/32,fe80::/10
{{- end }}

{{/* The bits of an IPv4 or IPv6 address: "4:<32 bits>" or "6:<128 bits>"; "" when it
     is neither (an IPv6 address written with a dotted IPv4 tail counts as neither). */}}
{{- define "streamq.ipBits" -}}
{{- $addr := lower (trim .) }}
{{- if and (contains "." $addr) (not (contains ":" $addr)) }}
{{- $octets := splitList "." $addr }}
{{- if eq (len $octets) 4 }}
{{- $bits := "" }}
{{- range $octets }}{{ $bits = print $bits (printf "%08b" (atoi .)) }}{{ end }}
{{- print "4:" $bits }}
{{- end }}
{{- else if and (contains ":" $addr) (not (contains "." $addr)) }}
{{- $parts := splitList "::" $addr }}
{{- $head := list }}
{{- if first $parts }}{{ $head = splitList ":" (first $parts) }}{{ end }}
{{- $tail := list }}
{{- if and (eq (len $parts) 2) (last $parts) }}{{ $tail = splitList ":" (last $parts) }}{{ end }}
{{- $groups := $head }}
{{- if eq (len $parts) 2 }}
{{- range until (int (sub 8 (add (len $head) (len $tail)))) }}{{ $groups = append $groups "0" }}{{ end }}
{{- end }}
{{- $groups = concat $groups $tail }}
{{- if eq (len $groups) 8 }}
{{- $nibbles := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 }}
{{- $bits := "" }}
{{- range $groups }}
{{- range splitList "" (print (repeat (int (sub 4 (len .))) "0") .) }}{{ $bits = print $bits (printf "%04b" (get $nibbles .)) }}{{ end }}
{{- end }}
{{- print "6:" $bits }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when the first CIDR of the list contains the second (same family, a prefix at
     most as long, the same leading bits); "" otherwise, or when either is not a CIDR. */}}
{{- define "streamq.cidrContains" -}}
{{- $outer := splitList "/" (index . 0 | toString) }}
{{- $inner := splitList "/" (index . 1 | toString) }}
{{- if and (eq (len $outer) 2) (eq (len $inner) 2) }}
{{- $ob := include "streamq.ipBits" (first $outer) }}
{{- $ib := include "streamq.ipBits" (first $inner) }}
{{- $op := atoi (last $outer) }}
{{- $ip := atoi (last $inner) }}
{{- if and $ob $ib (eq (substr 0 1 $ob) (substr 0 1 $ib)) (le $op $ip) }}
{{- if eq (substr 2 (int (add 2 $op)) $ob) (substr 2 (int (add 2 $op)) $ib) }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* A list of NetworkPolicy peers (as JSON: {"peers": [...]}) without the metadata
     endpoints, as JSON {"peers": [...]}. */}}
{{- define "streamq.guardPeers" -}}
{{- $blocked := splitList "," (include "streamq.metadataCIDRs" .) }}
{{- $out := list }}
{{- range (fromJson .).peers }}
{{- if and (kindIs "map" .) (hasKey . "ipBlock") }}
{{- $cidr := .ipBlock.cidr | toString }}
{{- $except := list }}
{{- range (.ipBlock.except | default list) }}{{ $except = append $except (toString .) }}{{ end }}
{{- $drop := false }}
{{- range $b := $blocked }}
{{- if include "streamq.cidrContains" (list $b $cidr) }}
{{- $drop = true }}
{{- else if include "streamq.cidrContains" (list $cidr $b) }}
{{- $covered := false }}
{{- range $except }}{{ if include "streamq.cidrContains" (list . $b) }}{{ $covered = true }}{{ end }}{{ end }}
{{- if not $covered }}{{ $except = append $except $b }}{{ end }}
{{- end }}
{{- end }}
{{- if not $drop }}
{{- $block := dict "cidr" $cidr }}
{{- if $except }}{{ $_ := set $block "except" $except }}{{ end }}
{{- $out = append $out (merge (dict "ipBlock" $block) (omit . "ipBlock")) }}
{{- end }}
{{- else }}
{{- $out = append $out . }}
{{- end }}
{{- end }}
{{- toJson (dict "peers" $out) }}
{{- end }}

{{/* Egress rules (JSON {"rules": [...]}) without the metadata endpoints: each rule's `to`
     guarded; a rule without `to` (every destination) gets every pod, and every address
     but those; a rule whose peers were all dropped goes (an empty `to` would allow all). */}}
{{- define "streamq.guardEgress" -}}
{{- $everywhere := list (dict "namespaceSelector" dict) (dict "ipBlock" (dict "cidr" "0.0.0.0/0")) (dict "ipBlock" (dict "cidr" "::/0")) }}
{{- $out := list }}
{{- range (fromJson .).rules }}
{{- $rule := . }}
{{- $to := $rule.to | default $everywhere }}
{{- $peers := (fromJson (include "streamq.guardPeers" (toJson (dict "peers" $to)))).peers }}
{{- if $peers }}
{{- $out = append $out (merge (dict "to" $peers) (omit $rule "to")) }}
{{- end }}
{{- end }}
{{- toJson (dict "rules" $out) }}
{{- end }}
