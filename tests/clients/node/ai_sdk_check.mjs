// The Vercel AI SDK with @ai-sdk/openai: openai(model) (the Responses API, its default), openai.chat(model), embeddings.
import { createOpenAI } from "@ai-sdk/openai";
import { embed, generateText, streamText } from "ai";

const openai = createOpenAI({ baseURL: `${process.env.GATEWAY_URL}/v1`, apiKey: process.env.GATEWAY_KEY });
const out = {};
out.responses = (await generateText({ model: openai("gpt-4o-mini"), prompt: "hello" })).text;
out.responses_claude = (await generateText({ model: openai("claude-haiku-4-5"), prompt: "hello" })).text;
out.chat = (await generateText({ model: openai.chat("gemini-2.5-flash"), prompt: "hello" })).text;
let streamed = "";
for await (const delta of streamText({ model: openai("gpt-4o-mini"), prompt: "hello" }).textStream) streamed += delta;
out.stream = streamed;
out.embedding_dims = (await embed({ model: openai.embedding("text-embedding-3-small"), value: "hello" })).embedding.length;
console.log(JSON.stringify(out));
