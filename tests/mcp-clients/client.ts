// The official TypeScript MCP client (npm @modelcontextprotocol/client) driving a parkway
// tool over Streamable HTTP. Node 22 runs this file as it is (its types are stripped).
//
// The client pins protocol 2026-07-28 (no handshake: every request carries its version,
// capabilities and client info) and declares elicitation; its `elicitation/create`
// handler is the person at the client. The tool `release` (targets.json) asks its
// caller twice, each ask one `input_required` round.
//
//   node client.ts rounds URL             list the tools, call `release`; the SDK answers
//                                         both rounds through the elicitation handler
//   node client.ts first URL STATE_FILE   call `release` in manual mode; keep the first
//                                         round (its requests and requestState) in STATE_FILE
//   node client.ts resume URL STATE_FILE  after the server was killed and started again:
//                                         answer the kept round with the same handler, retry
//                                         with the kept requestState; the SDK answers the
//                                         second round; the result must be whole
//   node client.ts hop URL                call `hop_region` (hop-targets.json): the question
//                                         of the MCP server the run calls comes to this client
//
// Every check throws on failure; the script exits non-zero with the reason.

import { readFileSync, writeFileSync } from 'node:fs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const VERSION = '2026-07-28';
const ARGUMENTS = { service: 'api', version: '1.4.2' };
const EXPECTED = { service: 'api', version: '1.4.2', go: true, channel: 'beta' };
const RUN = 'io.parkway/run';

type Json = any;

function check(ok: boolean, what: string): void {
    if (!ok) throw new Error(`check failed: ${what}`);
}

function same(a: Json, b: Json): boolean {
    return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

function sorted(v: Json): Json {
    if (Array.isArray(v)) return v.map(sorted);
    if (v && typeof v === 'object') {
        return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
    }
    return v;
}

/** Answers the questions the way a person at the client would, and remembers them. */
class Person {
    asked: string[] = [];

    async elicit(request: Json): Promise<Json> {
        const params = request.params;
        check(params.mode === undefined || params.mode === 'form', `a form elicitation: ${JSON.stringify(params)}`);
        const message: string = params.message;
        const schema = params.requestedSchema;
        this.asked.push(message);
        console.log(`  elicitation: ${JSON.stringify(message)} schema=${JSON.stringify(sorted(schema))}`);
        const answer = schema?.properties?.answer ?? {};
        switch (message) {
            case 'Release api 1.4.2?':
                check(answer.type === 'boolean', `the confirm ask wants a boolean: ${JSON.stringify(schema)}`);
                return { action: 'accept', content: { answer: true } };
            case 'Which channel for api?':
                check(same(answer.enum, ['stable', 'beta', 'nightly']), `the select ask offers its options: ${JSON.stringify(schema)}`);
                return { action: 'accept', content: { answer: 'beta' } };
            case 'Which region should the deployment go to?':
                check(schema?.properties?.region?.type === 'string', `the remote server asks for a string region: ${JSON.stringify(schema)}`);
                return { action: 'accept', content: { region: 'eu-west-1' } };
            default:
                throw new Error(`a question this client was not told about: ${JSON.stringify(message)}`);
        }
    }
}

async function connect(url: string, person: Person): Promise<Client> {
    const client = new Client(
        { name: 'parkway-ts-client-test', version: '0' },
        {
            capabilities: { elicitation: { form: {} } },
            // Modern era at exactly 2026-07-28: no probe, no fallback to the 2025 handshake.
            versionNegotiation: { mode: { pin: VERSION } },
        },
    );
    // The same handler serves a 2025 server's elicitation request and, on 2026-07-28,
    // each elicitation inside an input_required round.
    client.setRequestHandler('elicitation/create', (request: Json) => person.elicit(request));
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return client;
}

function structured(result: Json): Json {
    check(!result.isError, `the call failed: ${JSON.stringify(result.content)}`);
    return result.structuredContent;
}

async function rounds(url: string): Promise<void> {
    const person = new Person();
    const client = await connect(url, person);
    try {
        const { tools } = await client.listTools();
        const names = tools.map((t: Json) => t.name);
        console.log(`  tools: ${JSON.stringify(names)}`);
        check(same(names, ['release']), `the tools listed: ${names}`);
        check(same(tools[0].inputSchema.required, ['service', 'version']), 'the input schema');
        // The SDK runs both rounds inside callTool: each input_required answer goes to the
        // elicitation handler, and the call is retried with inputResponses and the echoed
        // requestState.
        const result: Json = await client.callTool({ name: 'release', arguments: ARGUMENTS });
        const got = structured(result);
        console.log(`  result: ${JSON.stringify(sorted(got))}`);
        check(same(got, EXPECTED), `the result: ${JSON.stringify(got)}`);
        check(same(person.asked, ['Release api 1.4.2?', 'Which channel for api?']), `the questions: ${person.asked}`);
        check(Boolean(result._meta?.[RUN]), `the result names its run: ${JSON.stringify(result._meta)}`);
    } finally {
        await client.close();
    }
}

async function first(url: string, stateFile: string): Promise<void> {
    const person = new Person();
    const client = await connect(url, person);
    try {
        // Manual mode for this call: the round is handed back instead of answered.
        const round: Json = await client.callTool({ name: 'release', arguments: ARGUMENTS }, { allowInputRequired: true });
        check(round.resultType === 'input_required', `a round, got ${JSON.stringify(round)}`);
        const keys = Object.keys(round.inputRequests ?? {});
        console.log(`  round 1: keys=${JSON.stringify(keys)} requestState=${(round.requestState ?? '').length} bytes`);
        check(same(keys, ['go']), `the first round asks the confirm, keyed by its payload: ${keys}`);
        check(Boolean(round.requestState), 'the round has a requestState');
        writeFileSync(stateFile, JSON.stringify(round));
        check(person.asked.length === 0, 'nothing was answered yet');
    } finally {
        await client.close();
    }
}

async function resume(url: string, stateFile: string): Promise<void> {
    const person = new Person();
    const kept = JSON.parse(readFileSync(stateFile, 'utf8'));
    const run = kept._meta?.[RUN];
    check(Boolean(run), `the kept round names its run: ${JSON.stringify(kept._meta)}`);
    const client = await connect(url, person);
    try {
        // The kept round's requests go to the same handler the SDK calls.
        const inputResponses: Record<string, Json> = {};
        for (const [key, request] of Object.entries(kept.inputRequests as Record<string, Json>)) {
            check(request.method === 'elicitation/create', `the kept request ${key} is an elicitation`);
            inputResponses[key] = await person.elicit(request);
        }
        // Seeded with the kept answers and state, callTool drives the second round itself.
        const result: Json = await client.callTool({
            name: 'release',
            arguments: ARGUMENTS,
            inputResponses,
            requestState: kept.requestState,
        } as Json);
        const got = structured(result);
        console.log(`  result after the restart: ${JSON.stringify(sorted(got))}`);
        check(same(got, EXPECTED), `the result: ${JSON.stringify(got)}`);
        check(same(person.asked, ['Release api 1.4.2?', 'Which channel for api?']), `the questions: ${person.asked}`);
        check(result._meta?.[RUN] === run, `the same run ${run} ended: ${JSON.stringify(result._meta)}`);
    } finally {
        await client.close();
    }
}

async function hop(url: string): Promise<void> {
    const person = new Person();
    const client = await connect(url, person);
    try {
        const result: Json = await client.callTool({ name: 'hop_region', arguments: { service: 'api' } });
        const got = structured(result);
        console.log(`  result through the hop: ${JSON.stringify(sorted(got))}`);
        check(same(person.asked, ['Which region should the deployment go to?']), `the questions: ${person.asked}`);
        check(
            same(got, { service: 'api', remote: { service: 'api', region: 'eu-west-1', deployed: true } }),
            `the result: ${JSON.stringify(got)}`,
        );
    } finally {
        await client.close();
    }
}

const [mode, url, stateFile] = process.argv.slice(2);
const modes: Record<string, () => Promise<void>> = {
    rounds: () => rounds(url),
    first: () => first(url, stateFile),
    resume: () => resume(url, stateFile),
    hop: () => hop(url),
};
const chosen = mode === undefined ? undefined : modes[mode];
if (chosen === undefined || url === undefined || ((mode === 'first' || mode === 'resume') && stateFile === undefined)) {
    console.error('usage: node client.ts rounds URL | first URL STATE_FILE | resume URL STATE_FILE | hop URL');
    process.exit(2);
}
try {
    await chosen();
    console.log(`typescript client: ${mode}: ok`);
} catch (e) {
    console.error(`typescript client: ${mode}: ${e instanceof Error ? e.stack : e}`);
    process.exit(1);
}
