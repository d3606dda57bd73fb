{{/* The name of every object: the release's, or release-walrelay. */}}
{{- define "walrelay.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "walrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "walrelay.labels" -}}
{{ include "walrelay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "walrelay.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "walrelay.fleet" -}}
{{- eq .Values.mode "fleet" -}}
{{- end -}}

{{/*
The process-wide settings (docs/fleet.md): Kafka's, the HTTP address and the
log format, as flag name: value, with the paths of the mounted files.
*/}}
{{- define "walrelay.processWide" -}}
brokers: {{ required "kafka.brokers: the Kafka bootstrap brokers, host:port,..." .Values.kafka.brokers | quote }}
{{- with .Values.kafka.tls }}
{{- if .enabled }}
kafka-tls: "true"
{{- if .caConfigMap }}
kafka-tls-ca-file: {{ printf "/etc/walrelay/kafka-ca/%s" .caKey | quote }}
{{- end }}
{{- if .clientCertSecret }}
kafka-tls-cert-file: /etc/walrelay/kafka-client/tls.crt
kafka-tls-key-file: /etc/walrelay/kafka-client/tls.key
{{- end }}
{{- if .serverName }}
kafka-tls-server-name: {{ .serverName | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.kafka.sasl }}
{{- if .mechanism }}
kafka-sasl-mechanism: {{ .mechanism | quote }}
kafka-sasl-username: {{ required "kafka.sasl.username" .username | quote }}
kafka-sasl-password-file: {{ printf "/etc/walrelay/kafka-sasl/%s" .passwordKey | quote }}
{{- end }}
{{- end }}
http-addr: {{ printf ":%v" .Values.httpPort | quote }}
log-format: {{ .Values.logFormat | quote }}
{{- end -}}

{{/* WALRELAY_NAME: the variable of flag name (cmd/walrelay). */}}
{{- define "walrelay.envName" -}}
WALRELAY_{{ . | upper | replace "-" "_" }}
{{- end -}}
