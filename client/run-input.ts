/**
 * What a run was started with, read back through the Temporal client: the first event of
 * its latest execution holds the spec (a fresh spec, or a continued run carrying it),
 * decoded with the client's own data converter (so encrypted payloads are read).
 */
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';

export async function startedSpecInput(client: Client, workflowId: string): Promise<{ description: WorkflowExecutionDescription; specInput: unknown }> {
  const description = await client.workflow.getHandle(workflowId).describe();
  const history = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId, runId: description.runId },
    maximumPageSize: 1,
  });
  const started = history.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  const [input] = await decodeArrayFromPayloads(client.options.loadedDataConverter, started?.input?.payloads);
  const specInput = input && typeof input === 'object' && 'continued' in input ? (input as unknown as { spec: unknown }).spec : input;
  return { description, specInput };
}
