// The one settings schema: snooze.yaml, annotations and the CRDs all use it.
export {
  type AnnotationProblem,
  annotationFor,
  annotationPrefix,
  asksForModel,
  modelAnnotation,
  settingsFromAnnotations,
} from "./annotations.ts";
export { type ChangedModel, type ConfigDiff, diffConfig, engineKeys, isEmptyDiff } from "./config-diff.ts";
export { ConfigError, type ConfigProblem } from "./config-error.ts";
export { byteSize, duration, modelId } from "./fields.ts";
export { type SnoozeFile, type SnoozeFileInput, snoozeFile } from "./file.ts";
export { type LoadOptions, loadConfigFile, maxConfigBytes, parseConfig, readConfigBytes } from "./load.ts";
export { loadConfigFileOffLoop } from "./load-off-loop.ts";
export {
  builtinTierDefaults,
  type LocalModelInput,
  localModel,
  type ResolvedTierSettings,
  type TierSettings,
  type TierSettingsInput,
  tierSettings,
} from "./model.ts";
export { type PlaceholderValues, snoozeArgument, substitutePlaceholders } from "./placeholders.ts";
export {
  defaultBodyTimeout,
  defaultMaxHeldBytes,
  explicitTierKeys,
  type ModelConfig,
  resolveConfig,
  type SlotConfig,
  type SnoozeConfig,
} from "./resolve.ts";
export { builtinSlotDefaults, type SlotSettings, slotSettings } from "./slot.ts";
export { type UnusedSetting, unusedSettings } from "./unused-settings.ts";
