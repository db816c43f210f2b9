// The openafm playground: builds an OpenAI chat request from the form, streams it (server-sent events) with
// the openafm_profile extension, and draws the per-token profile. Plain JS, no build step.
"use strict";

const $ = (id) => document.getElementById(id);

const SCHEMAS = {
  "Person": {type: "object", properties: {name: {type: "string"}, age: {type: "integer", minimum: 0, maximum: 120},
             hobbies: {type: "array", items: {type: "string"}, maxItems: 3}}, required: ["name", "age", "hobbies"],
             additionalProperties: false},
  "City": {type: "object", properties: {city: {type: "string"}, country: {type: "string"},
           population: {type: "integer", minimum: 0}}, required: ["city", "country", "population"],
           additionalProperties: false},
  "Sentiment": {type: "object", properties: {sentiment: {enum: ["positive", "neutral", "negative"]},
                confidence: {type: "number", minimum: 0, maximum: 1}}, required: ["sentiment", "confidence"],
                additionalProperties: false},
  "Colours (list)": {type: "array", items: {type: "string"}, minItems: 3, maxItems: 3},
};
const TOOLS = [{type: "function", function: {name: "get_weather", description: "Current weather in a city",
  parameters: {type: "object", properties: {city: {type: "string"}}, required: ["city"],
               additionalProperties: false}}}];

let controller = null;

function init() {
  for (const name of Object.keys(SCHEMAS)) $("schema-example").add(new Option(name, name));
  $("schema-example").onchange = () => { $("schema").value = JSON.stringify(SCHEMAS[$("schema-example").value], null, 2); };
  $("schema-example").onchange();
  $("tools").value = JSON.stringify(TOOLS, null, 2);
  $("run").onclick = run;
  $("stop").onclick = () => controller && controller.abort();
  $("copy-python").onclick = copyPython;
  $("api-key").value = sessionStorage.getItem("openafm-api-key") || "";
  $("api-key").onchange = () => { sessionStorage.setItem("openafm-api-key", $("api-key").value); loadModels(); };
  loadModels();
  fetch("/health").then((r) => r.json()).then((h) => { $("health").textContent = `${h.status}: ${h.models.length} model(s)`; });
}

// The headers of an API call: with the key typed above (a server started with --api-key needs it).
function apiHeaders() {
  const key = $("api-key").value.trim();
  return key ? {"Content-Type": "application/json", "Authorization": `Bearer ${key}`} : {"Content-Type": "application/json"};
}

function loadModels() {
  fetch("/v1/models", {headers: apiHeaders()}).then(async (r) => {
    if (r.status === 401) { $("health").textContent = "this server needs an API key: enter it on the right"; return; }
    const list = await r.json();
    $("model").innerHTML = "";
    for (const m of list.data) $("model").add(new Option(`${m.id} (${m.kind})`, m.id));
  });
}

function parsed(id) {
  const text = $(id).value.trim();
  try { return JSON.parse(text); } catch (e) { throw new Error(`${id}: ${e.message}`); }
}

function requestBody() {
  const messages = [];
  if ($("instructions").value.trim()) messages.push({role: "system", content: $("instructions").value});
  messages.push({role: "user", content: $("prompt").value});
  const body = {model: $("model").value, messages, stream: true, stream_options: {include_usage: true},
                openafm_profile: true, max_tokens: Number($("max-tokens").value),
                temperature: Number($("temperature").value)};
  if (body.temperature > 0 && Number($("top-p").value) < 1) body.top_p = Number($("top-p").value);
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  if ($("use-schema").checked) {
    body.response_format = {type: "json_schema", json_schema: {name: "output", schema: parsed("schema"), strict: true}};
  }
  if ($("use-tools").checked) { body.tools = parsed("tools"); body.tool_choice = $("tool-choice").value; }
  return body;
}

async function run() {
  let body;
  $("schema-error").textContent = "";
  try { body = requestBody(); } catch (e) { $("schema-error").textContent = e.message; return; }
  $("output").textContent = ""; $("finish").textContent = ""; $("tokens").innerHTML = "";
  $("python").textContent = python(body);
  const profile = {tokens: [], prefill: null, start: performance.now(), usage: null, toolCalls: null, done: false};
  drawStats(profile);
  controller = new AbortController();
  $("run").disabled = true; $("stop").disabled = false;
  try {
    const response = await fetch("/v1/chat/completions", {method: "POST", headers: apiHeaders(),
                                                          body: JSON.stringify(body), signal: controller.signal});
    if (!response.ok) {
      const err = await response.json();
      $("output").textContent = `error ${response.status}: ${err.error.message}` + (err.error.param ? ` (param: ${err.error.param})` : "");
      return;
    }
    await readEvents(response, (chunk) => onChunk(chunk, profile));
  } catch (e) {
    if (e.name !== "AbortError") $("output").textContent += `\n[${e.message}]`;
    else $("finish").textContent = "(stopped)";
  } finally {
    profile.done = true; drawStats(profile);
    $("run").disabled = false; $("stop").disabled = true; controller = null;
    document.body.dataset.state = "done";
  }
}

async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

function onChunk(chunk, profile) {
  if (chunk.error) { $("output").textContent += `\n[error: ${chunk.error.message}]`; return; }
  if (chunk.usage) profile.usage = chunk.usage;
  if (chunk.openafm) {
    if (chunk.openafm.prefill) profile.prefill = chunk.openafm.prefill;
    if (chunk.openafm.token) { profile.tokens.push(chunk.openafm.token); addToken(chunk.openafm.token); }
  }
  for (const choice of chunk.choices || []) {
    const delta = choice.delta || {};
    if (delta.content) $("output").textContent += delta.content;
    if (delta.tool_calls) {
      profile.toolCalls = delta.tool_calls;
      $("output").textContent += delta.tool_calls.map((c) => `tool call: ${c.function.name}(${c.function.arguments})`).join("\n");
    }
    if (choice.finish_reason) $("finish").textContent = `finish_reason: ${choice.finish_reason}`;
  }
  drawStats(profile);
}

function addToken(t) {
  const span = document.createElement("span");
  span.className = "tok " + (t.forced ? "forced" : t.guessed ? "guessed" : "sampled");
  span.textContent = t.text;
  span.title = `id ${t.id} at ${t.t_ms.toFixed(1)} ms, mask ${t.mask_ms.toFixed(3)} ms` + (t.logprob != null ? `, logprob ${t.logprob.toFixed(3)}` : "");
  $("tokens").appendChild(span);
}

function drawStats(p) {
  const toks = p.tokens;
  const rows = [];
  if (toks.length) {
    const ttft = toks[0].t_ms, last = toks[toks.length - 1].t_ms;
    const forced = toks.filter((t) => t.forced).length;
    const mask = toks.reduce((s, t) => s + t.mask_ms, 0);
    rows.push(["time to first token", `${ttft.toFixed(1)} ms`]);
    if (p.prefill) {
      const fresh = p.prefill.prompt_tokens - p.prefill.cached_prompt_tokens;
      rows.push(["prompt tokens", `${p.prefill.prompt_tokens} (${p.prefill.cached_prompt_tokens} from the prefix cache)`]);
      rows.push(["prefill", `${p.prefill.prefill_ms.toFixed(1)} ms, ${(fresh / p.prefill.prefill_ms * 1e3).toFixed(1)} tok/s`]);
      rows.push(["decode step", p.prefill.step || "?"]);
    }
    if (toks.length > 1) rows.push(["decode", `${((toks.length - 1) / (last - ttft) * 1e3).toFixed(1)} tok/s over ${toks.length - 1} tokens`]);
    const guessed = toks.filter((t) => t.guessed).length;
    rows.push(["tokens", `${toks.length}: ${toks.length - forced} sampled, ${forced} forced by the grammar`]);
    if (p.prefill && p.prefill.speculate !== "off") {
      rows.push(["speculation", `${p.prefill.speculate}: ${guessed} of the sampled tokens were guesses verified in the step that fed them`]);
    }
    const masks = toks.filter((t) => !t.forced && t.mask_ms > 0).map((t) => t.mask_ms).sort((a, b) => a - b);
    const median = masks.length ? masks[Math.floor(masks.length / 2)] : 0;
    rows.push(["grammar mask", masks.length ? `${mask.toFixed(2)} ms total, median ${median.toFixed(3)} ms per sampled token (the first includes building the grammar)` : "no grammar"]);
    rows.push(["KV cache", `${(toks[toks.length - 1].kv_bytes / 1024).toFixed(1)} KiB`]);
  }
  if (p.usage) rows.push(["usage", `${p.usage.prompt_tokens} prompt + ${p.usage.completion_tokens} completion`]);
  $("stats").tBodies[0].innerHTML = rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
  drawTimeline(toks);
  if (p.done) $("stats").dataset.done = "1";
}

function drawTimeline(toks) {
  const c = $("timeline"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  if (!toks.length) return;
  const gaps = toks.map((t, i) => t.t_ms - (i ? toks[i - 1].t_ms : 0));
  const top = Math.max(...gaps.slice(1), 1), w = Math.max(2, Math.min(24, (c.width - 10) / toks.length));
  g.fillStyle = "#777"; g.font = "10px sans-serif";
  g.fillText(`first token ${gaps[0].toFixed(0)} ms (off scale); scale ${top.toFixed(1)} ms`, 4, 10);
  toks.forEach((t, i) => {
    const h = Math.min(1, gaps[i] / top) * (c.height - 20);
    g.fillStyle = t.forced ? "#6f9cff" : "#4cbf4c";
    g.fillRect(5 + i * w, c.height - h, w - 1, h);
    g.fillStyle = "#333";
    g.fillRect(5 + i * w, c.height - h, w - 1, Math.min(h, t.mask_ms / top * (c.height - 20)));
  });
}

function py(value) {
  return JSON.stringify(value, null, 4).replace(/\btrue\b/g, "True").replace(/\bfalse\b/g, "False").replace(/\bnull\b/g, "None");
}

function python(body) {
  const system = body.messages.find((m) => m.role === "system");
  const user = body.messages[body.messages.length - 1].content;
  const lines = ["import asyncio", "import openafm.fm as fm", ""];
  if (body.tools) {
    lines.push("# Tools: subclass fm.Tool for each function (name, description, arguments_schema, async call):");
    for (const t of body.tools) {
      const cls = t.function.name.replace(/(^|_)(\w)/g, (_, __, c) => c.toUpperCase());
      lines.push(`class ${cls}(fm.Tool):`, `    name = ${JSON.stringify(t.function.name)}`,
                 `    description = ${JSON.stringify(t.function.description || t.function.name)}`, "",
                 "    @property", "    def arguments_schema(self):",
                 `        return fm.GenerationSchema.from_json_schema(${py(t.function.parameters).replace(/\n/g, "\n        ")})`, "",
                 "    async def call(self, args):", "        return \"...\"  # your implementation", "");
    }
  }
  const sampling = body.temperature > 0
    ? `fm.SamplingMode.random(${[body.top_p ? `probability_threshold=${body.top_p}` : "", body.seed != null ? `seed=${body.seed}` : ""].filter(Boolean).join(", ")})`
    : "fm.SamplingMode.greedy()";
  lines.push("async def main():");
  const model = body.model && $("model").selectedIndex > 0
    ? `fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter("${body.model}.safetensors"))  # the adapter file`
    : "fm.SystemLanguageModel()";
  const toolsArg = body.tools ? `, tools=[${body.tools.map((t) => t.function.name.replace(/(^|_)(\w)/g, (_, __, c) => c.toUpperCase()) + "()").join(", ")}]` : "";
  const choiceArg = body.tools && body.tool_choice === "required" ? ', tool_choice="required"' : "";
  lines.push(`    session = fm.LanguageModelSession(instructions=${system ? JSON.stringify(system.content) : "None"}, model=${model}${toolsArg}${choiceArg})`);
  lines.push(`    options = fm.GenerationOptions(sampling=${sampling}${body.temperature > 0 ? `, temperature=${body.temperature}` : ""}, maximum_response_tokens=${body.max_tokens})`);
  if (body.response_format) {
    lines.push(`    schema = ${py(body.response_format.json_schema.schema).replace(/\n/g, "\n    ")}`);
    lines.push(`    content = await session.respond(${JSON.stringify(user)}, json_schema=schema, options=options)`);
    lines.push("    print(content)");
  } else {
    lines.push(`    async for text in session.stream_response(${JSON.stringify(user)}, options=options):`);
    lines.push("        print(text)");
  }
  lines.push("", "asyncio.run(main())");
  return lines.join("\n");
}

async function copyPython() {
  let body;
  try { body = requestBody(); } catch (e) { $("schema-error").textContent = e.message; return; }
  const code = python(body);
  $("python").textContent = code;
  try { await navigator.clipboard.writeText(code); } catch (e) { /* no clipboard permission: the code is shown */ }
}

init();
