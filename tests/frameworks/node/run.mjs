// One agent run of the Vercel AI SDK, for tests/frameworks/test_vercel_ai.py.
// Argument: a JSON object {provider, stream, baseURL, model, question, instructions, results}
// where provider is "openai" (its default, the Responses API), "openai-chat" or "anthropic",
// and results maps each tool's name to its output with "{city}" standing for the argument.
// Prints {"text": final answer, "steps": model calls} as one line of JSON.
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const run = JSON.parse(process.argv[2]);

function model() {
  const options = { baseURL: run.baseURL, apiKey: "sk-test-vercel" };
  if (run.provider === "anthropic") return createAnthropic(options)(run.model);
  const openai = createOpenAI(options);
  return run.provider === "openai-chat" ? openai.chat(run.model) : openai(run.model);
}

function cityTool(name, description) {
  return tool({
    description,
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => run.results[name].replace("{city}", city),
  });
}

const request = {
  model: model(),
  system: run.instructions,
  prompt: run.question,
  tools: {
    get_weather: cityTool("get_weather", "The current weather of a city."),
    get_time: cityTool("get_time", "The local time of a city."),
  },
  stopWhen: stepCountIs(5),
  maxRetries: 0,
};

let text, steps;
if (run.stream) {
  const result = streamText(request);
  // Read every part, as a UI would; a failed step fails the run.
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
  }
  text = await result.text;
  steps = (await result.steps).length;
} else {
  const result = await generateText(request);
  text = result.text;
  steps = result.steps.length;
}
console.log(JSON.stringify({ text, steps }));
