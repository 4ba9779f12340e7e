/** The smallest real workflow: one activity, used by the foundation test. */
import { proxyActivities } from '@temporalio/workflow';

export interface EchoActivities {
  shout(text: string): Promise<string>;
}

const { shout } = proxyActivities<EchoActivities>({ startToCloseTimeout: '10 seconds' });

export async function echo(text: string): Promise<string> {
  return `${await shout(text)}!`;
}
