{{/* The manager's name: its ServiceAccount, workload and roles (rbac.yaml is generated with it). */}}
{{- define "stratus-ccm.name" -}}
@@account@@
{{- end -}}

{{/* Labels of every object. */}}
{{- define "stratus-ccm.labels" -}}
app.kubernetes.io/name: {{ include "stratus-ccm.name" . }}
app.kubernetes.io/part-of: stratus
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The pods' selector. */}}
{{- define "stratus-ccm.selector" -}}
app.kubernetes.io/name: {{ include "stratus-ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
