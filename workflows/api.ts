/**
 * What the rest of Sterna (activities, workers, the CLI and client, the emulator, the
 * benchmarks) may use of workflows/: the contracts, messages, spec, views and pure rules
 * they share with the workflows, in one place. Other folders import from here, never from
 * a path inside workflows/. The workflow functions themselves (for their types) are the
 * bundle's entry, index.ts; nothing here reaches them, so the client package never
 * carries workflow code. Tests may reach inside.
 */
export { ReleaseOutcome } from './activity-contract';
export type { AgentInputs, BucketAnswer, CapacityFound, CapacityRequest, CheckActivities, DatasetAnswer, KeepRequest, KeepResult, LogActivities, MoveAnswer, ProvisionRequest, ProvisionResult, ReleaseRequest, ReleaseResult, SetAgentInputOutcome, SternaActivities, StorageActivities, UnpricedZone } from './activity-contract';
export { causeChain, causeMessages, findCause, isGrpcStatusError } from './causes';
export { blockingFindings } from './checks';
export type { Finding } from './checks';
export { formatDuration, isDurationString, parseDurationSeconds } from './duration';
export { FailureType, failure, namedFailureOf, nonRetryableFailureTypes } from './failures';
export { DEFAULT_FLEET_SETTINGS, observerWorkflowId, resourceKey } from './fleet/contract';
export type { AgentValues, CarriedMemory, EnsureObserverResult, FleetActivities, FleetObserverInput, FleetSettings, Lifecycle, ObserverOptions, WatchFleetInput, WatchFleetResult, WatchStats } from './fleet/contract';
export { observerWantedSignal } from './fleet/messages';
export { DEFAULT_OBSERVER_OPTIONS } from './fleet/options';
export { SharingStrategy, SliceLabel, devicesPerGpu, sameSlice, sliceKey } from './gpu-slices';
export type { GpuSlice } from './gpu-slices';
export { imageReferenceProblem } from './image-reference';
export { LABEL_VALUE_RULE, isLabelValue } from './labels';
export { observationSignal, setBudgetUpdate, setDeadlineUpdate, statusQuery } from './messages';
export type { ResourceObservation, TrainingRunWorkflow } from './messages';
export { OwnerLabel, executionToken, fnv1a, isOwnedBy, resourceName, runKey } from './naming';
export type { Owner } from './naming';
export { rankOffers } from './placement';
export { throughputMemoryWorkflowId } from './plan/contract';
export type { PlanResult, PlanRow, ThroughputActivities } from './plan/contract';
export { emptyThroughputMemory, isThroughputMemory, throughputSlice } from './plan/measured';
export type { ThroughputMemory, ThroughputSample } from './plan/measured';
export { throughputMemoryQuery, throughputSamplesSignal } from './plan/messages';
export { modelsOf } from './pricing';
export { PRICE_BOOK_MEMO, PriceSource, priceBookWorkflowId } from './pricing-book/contract';
export type { PriceBookActivities, PriceBookData, PriceBookInput, PriceBookMemo, PriceBookSettings, PriceStamp } from './pricing-book/contract';
export { priceBookQuery, refreshPricesSignal } from './pricing-book/messages';
export { gpuEquivalent, nodeShare } from './pricing-slices';
export { seededRandom } from './random';
export type { ReaperActivities } from './reaper/contract';
export { DEFAULT_GRACE_SECONDS } from './reaper/decide';
export type { OwnerRun, ReapedResource, ReaperInput, ReaperResult } from './reaper/decide';
export { regionOf } from './region';
export { PRIOR_PREEMPTIONS_PER_HOUR, PRIOR_WEIGHT_HOURS, checkpointInterval } from './run/checkpoint-interval';
export { COST_MEMO } from './run/cost-refresh';
export type { CostLine, CostMemo } from './run/cost-refresh';
export { DEFAULT_MASTER_PORT, gangRelease, gangSize, gangSnapshot, gangStartedAt, nodeRefs, nodeRequest } from './run/gang';
export { INTERVAL_ATTRIBUTE } from './run/live-interval';
export type { MemoryActivities } from './run/memory-contract';
export { notifyKey } from './run/notify';
export type { NotifyEvent } from './run/notify';
export type { DeliveryReport, NotifyActivities, ReapedNotice } from './run/notify-contract';
export { NotifyKind, WebhookFormat, teamWebhooksSchema, webhookEnvName } from './run/notify-spec';
export type { TeamWebhooks, WebhookTarget } from './run/notify-spec';
export { LAST_LINE_CHARS, boundLastLine } from './run/last-line';
export { formatSeconds } from './run/progress';
export { Phase } from './run/state';
export { RELEASING_MEMO } from './run/views';
export { KEEP_UNTIL_LABEL } from './run/keep';
export type { KeptView } from './run/kept-view';
export type { RunResult, RunStatus } from './run/views';
export { CLI_TYPE_NAMES, SternaAttempt, SternaTeam, searchAttributeCreateCommands, searchAttributeFlags, sternaSearchAttributes } from './search-attributes';
export { SecretScheme, parseSecretRef, secretManagerPath } from './secrets';
export { checkSpec, describeProblems, specWarnings } from './spec';
export type { RunSpec, RunSpecInput } from './spec';
export { isBucketName } from './storage-uri';
export { admissionOfQuery, admissionRequestSignal, admissionSignal, runEndedSignal, runSpendSignal, setTeamLimitsUpdate, teamOfLedgerId, teamQuery, teamWorkflowId } from './teams/contract';
export type { TeamActivities, TeamInput, TeamLedgerWorkflow } from './teams/contract';
export { PERIODS } from './teams/period';
export type { Period } from './teams/period';
export { DEFAULT_TEAM, limitsProblem, priorityOf, teamOf } from './teams/rules';
export type { AdmissionDecision, LimitsChange, TeamView } from './teams/rules';
export { ProvisioningModel } from './types';
export type { AgentSnapshot, Backend, CheckpointRef, GpuReading, Offer, ResourceRef, WorkdirRef } from './types';
export { parseZoneMemoryWorkflowId, zoneMemoryWorkflowId } from './zones/contract';
export type { ZoneActivities } from './zones/contract';
export { DEFAULT_COOLDOWN_SECONDS, OutcomeKind, emptyMemory, isZoneMemory, sliceFor, zonePriors } from './zones/memory';
export type { ZoneMemory, ZoneOutcome, ZonePrior } from './zones/memory';
export { zoneMemoryQuery, zoneOutcomesSignal } from './zones/messages';
