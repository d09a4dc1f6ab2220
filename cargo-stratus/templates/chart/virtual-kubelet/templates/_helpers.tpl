{{/* The ServiceAccount (rbac.yaml is generated with it). */}}
{{- define "stratus-vk.account" -}}
@@account@@
{{- end -}}

{{/* The workload's name: one a node. */}}
{{- define "stratus-vk.name" -}}
@@account@@-{{ required "nodeName is required" .Values.nodeName }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "stratus-vk.labels" -}}
app.kubernetes.io/name: @@account@@
app.kubernetes.io/part-of: stratus
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
stratus.dev/node: {{ .Values.nodeName }}
{{- end -}}

{{/* The pod's selector. */}}
{{- define "stratus-vk.selector" -}}
app.kubernetes.io/name: @@account@@
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
