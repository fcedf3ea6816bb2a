{{/* Chart name, overridable. */}}
{{- define "streamq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release> or <release>-<chart>, at most 52 characters (room for suffixes). */}}
{{- define "streamq.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "streamq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on everything. */}}
{{- define "streamq.labels" -}}
helm.sh/chart: {{ include "streamq.chart" . }}
{{ include "streamq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "streamq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's pods. */}}
{{- define "streamq.operatorSelectorLabels" -}}
{{ include "streamq.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "streamq.operatorName" -}}
{{- printf "%s-operator" (include "streamq.fullname" .) }}
{{- end }}

{{- define "streamq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "streamq.operatorName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "streamq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "streamq.jobImage" -}}
{{- default (include "streamq.image" .) .Values.jobs.image }}
{{- end }}

{{- define "streamq.peeringName" -}}
{{- default (include "streamq.fullname" .) .Values.operator.peering.name }}
{{- end }}

{{/* Whether the operator serves every namespace: only when watchNamespaces is ["*"] (an explicit choice). */}}
{{- define "streamq.clusterWide" -}}
{{- if has "*" .Values.operator.watchNamespaces }}true{{ end }}
{{- end }}

{{/* The namespaces the operator serves when it is not cluster-wide, comma-separated:
     watchNamespaces, or the release's namespace when none are listed. */}}
{{- define "streamq.watchNamespaces" -}}
{{- if .Values.operator.watchNamespaces }}
{{- .Values.operator.watchNamespaces | uniq | join "," }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Namespaces that get a driver ServiceAccount: the release's, the watched ones and the
     listed ones, once each. */}}
{{- define "streamq.driverNamespaces" -}}
{{- $all := list .Release.Namespace }}
{{- if not (include "streamq.clusterWide" .) }}
{{- range splitList "," (include "streamq.watchNamespaces" .) }}{{ $all = append $all . }}{{ end }}
{{- end }}
{{- range .Values.driver.namespaces }}{{ $all = append $all . }}{{ end }}
{{- $all | uniq | join "," }}
{{- end }}
