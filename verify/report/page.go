package report

import "html/template"

// page is the report document. The stylesheet is the only inline content
// (allowed by its hash in the CSP); every value goes through an action, so
// html/template escapes it for its context.
var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ACDS verification report{{if .HasResult}}: {{.Verdict}}{{end}}</title>
<style>` + style + `</style>
</head>
<body>
<h1>ACDS attestation bundle verification</h1>
{{- if .Upload}}
<form method="post" action="{{.Upload}}" enctype="multipart/form-data" id="upload">
<label>Attestation bundle (base64 or CBOR file; drop it here): <input type="file" name="attestationBundle" id="bundle"></label>
<label>Output (optional, the JSON output the bundle attests): <input type="file" name="output" id="output"></label>
<label>Or a disclosure alone (acds disclose; it carries its bundle): <input type="file" name="disclosure" id="disclosure"></label>
<button type="submit" id="verify">Verify</button>
<p class="note">The bundle is checked on this server, offline, under its policy (its own enclave); nothing is stored. <code>acds verify BUNDLE --html FILE</code> writes the same report on your machine under your policy.</p>
</form>
{{- end}}
{{- if .Error}}
<p class="error" id="error">{{.Error}}</p>
{{- end}}
{{- if .HasResult}}
<div class="verdict {{if .Valid}}valid{{else}}invalid{{end}}" id="verdict" data-valid="{{.Valid}}">{{.Verdict}}</div>
<p class="note">Verified at {{.VerifiedAt}}. Valid only when every check that applies passed.</p>
{{- if .Notes}}
<ul class="note">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
{{- end}}

<h2>Checks</h2>
<table id="checks">
<tr><th>check</th><th>result</th><th>what it establishes, or why not</th></tr>
{{- range .Checks}}
<tr data-check="{{.Name}}"><td><code>{{.Name}}</code></td><td class="{{.Class}}">{{.Status}}</td><td>{{.Label}}{{range .Reasons}}<br><span class="h">{{.}}</span>{{end}}</td></tr>
{{- end}}
</table>
{{- if .Relaxations}}
<p>Relaxations of the policy that applied:</p>
<ul id="relaxations">{{range .Relaxations}}<li>{{.}}</li>{{end}}</ul>
{{- end}}

<h2>Evidence chain</h2>
{{- if .ChainNote}}<p class="note">{{.ChainNote}}</p>{{end}}
<ol class="chain" id="chain">
{{- range .Chain}}
<li><strong>{{.Role}}</strong> <span class="{{.Class}}">[{{.Status}}]</span><br>{{.Subject}}{{if .Detail}}<br><span class="h">{{.Detail}}</span>{{end}}</li>
{{- end}}
</ol>

<h2>Measurement against the policy</h2>
<table id="measurement">
{{- range .Measurement}}<tr><th>{{.K}}</th><td class="h">{{.V}}</td></tr>{{end}}
{{- if .Allowed}}<tr><th>the policy allows</th><td class="h">{{range .Allowed}}{{.}}<br>{{end}}</td></tr>{{end}}
</table>

<h2>Notary statements (MPC-TLS)</h2>
<p class="note">{{.NotaryNote}}</p>
{{- range .Notary}}
<table class="notary">
<tr><th>session</th><td>{{.Index}}</td></tr>
{{- if .Error}}<tr><th>statement</th><td class="fail">{{.Error}}</td></tr>{{else}}
<tr><th>portal host (claims)</th><td>{{.Host}}</td></tr>
<tr><th>request line</th><td class="h">{{.RequestLine}}</td></tr>
<tr><th>certificate subject</th><td>{{.Subject}}</td></tr>
<tr><th>certificate verified for</th><td>{{.SNI}}</td></tr>
<tr><th>certificate chain</th><td class="h">{{.ChainDigest}}</td></tr>
<tr><th>address dialled</th><td>{{.Address}}</td></tr>
<tr><th>TLS version</th><td>{{.Version}}</td></tr>
<tr><th>cipher suite</th><td>{{.Suite}}</td></tr>
<tr><th>time</th><td>{{.Start}} to {{.End}}</td></tr>
<tr><th>traffic</th><td>{{.Traffic}}</td></tr>
<tr><th>notary key id</th><td class="h">{{.KeyID}}</td></tr>
{{- end}}
</table>
{{- end}}

<h2>Claims</h2>
{{- if .Claims}}
<table id="claims">{{range .Claims}}<tr><th>{{.K}}</th><td class="h">{{.V}}</td></tr>{{end}}</table>
{{- else}}<p class="note">The claims' signature did not verify: nothing they say is shown.</p>{{end}}
{{- with .Coverage}}
<h2>Coverage</h2>
<p class="note" id="coverage-summary">What the signed claims say the record was assembled from: {{.Summary}}.</p>
{{- if .Requests}}
<table id="coverage"><tr><th>request</th><th>status</th><th>pages</th><th>entries</th></tr>
{{- range .Requests}}<tr><td class="h">{{.RequestLine}}</td><td>{{.Status}}</td><td>{{.Pages}}</td><td>{{.Entries}}</td></tr>{{end}}
</table>
{{- end}}
{{- if .Unsupported}}<p class="note" id="coverage-unsupported">Types of the Patient compartment the portal does not search: {{.Unsupported}}.</p>{{end}}
{{- end}}
{{- if .Boot}}
<h2>Boot keys</h2>
<table id="boot">{{range .Boot}}<tr><th>{{.K}}</th><td class="h">{{.V}}</td></tr>{{end}}</table>
{{- end}}

{{- with .Output}}
<h2>Output</h2>
<table id="output">
<tr><th>digest</th><td class="h">{{.Digest}}</td></tr>
{{- if .Attested}}<tr><th>attested digest</th><td class="h">{{.Attested}}</td></tr>{{end}}
<tr><th>the attested output</th><td>{{.Match}}</td></tr>
{{- if .Source}}<tr><th>source (Provenance)</th><td>{{.Source}}</td></tr>{{end}}
{{- if .Error}}<tr><th>summary</th><td>{{.Error}}</td></tr>{{end}}
</table>
{{- if .Counts}}
<h3>Resources by type ({{.Total}})</h3>
<table id="resources">{{range .Counts}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>{{end}}</table>
{{- end}}
{{- if .Observations}}
<h3>Latest observations</h3>
<table id="observations"><tr><th>observation</th><th>value</th><th>when</th></tr>
{{- range .Observations}}<tr><td>{{.Name}}</td><td>{{.Value}}</td><td>{{.When}}</td></tr>{{end}}
</table>
{{- if .More}}<p class="note">and {{.More}} more codes.</p>{{end}}
{{- end}}
{{- end}}

{{- if .Disclosure}}
<h2>Disclosed entries</h2>
{{- if .Disclosed}}
<p class="note">These entries of the attested output are shown with proof that the enclave committed to them; the others stay hidden, and guessing their content confirms nothing (each leaf is salted).</p>
<table id="disclosed"><tr><th>entry</th><th>resource</th></tr>{{range .Disclosed}}<tr><td>{{.K}}</td><td>{{.V}}</td></tr>{{end}}</table>
{{- else}}<p class="note">No entry is shown as disclosed: the disclosure did not verify (see the checks above).</p>{{end}}
{{- end}}

<h2>The POST /v1/verify response</h2>
<p class="note">The same verification as the JSON object <code>POST /v1/verify</code> and <code>acds verify --json</code> return:</p>
<pre id="response">{{.ResponseJSON}}</pre>
{{- end}}
</body>
</html>
`))
