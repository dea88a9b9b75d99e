// The openai SDK for Node in its default configuration: chat, responses, embeddings, models.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: `${process.env.GATEWAY_URL}/v1`, apiKey: process.env.GATEWAY_KEY });
const user = [{ role: "user", content: "hello" }];
const out = {};
out.chat = (await client.chat.completions.create({ model: "gpt-4o-mini", messages: user })).choices[0].message.content;
let streamed = "";
const chat = await client.chat.completions.create({ model: "claude-haiku-4-5", messages: user, max_tokens: 64, stream: true });
for await (const chunk of chat) streamed += chunk.choices[0]?.delta?.content ?? "";
out.chat_stream = streamed;
out.responses = (await client.responses.create({ model: "gpt-4o-mini", input: "hello" })).output_text;
let responded = "";
const events = await client.responses.create({ model: "gemini-2.5-flash", input: "hello", stream: true });
for await (const event of events) if (event.type === "response.output_text.delta") responded += event.delta;
out.responses_stream = responded;
out.embedding_dims = (await client.embeddings.create({ model: "text-embedding-3-small", input: "hello" })).data[0].embedding.length;
out.models = (await client.models.list()).data.length;
out.model = (await client.models.retrieve("gpt-4o-mini")).id;
console.log(JSON.stringify(out));
