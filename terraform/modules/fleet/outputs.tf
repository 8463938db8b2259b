output "group_name" {
  description = "mdf submit --backend fleet --group (or --gpu-group)"
  value       = aws_autoscaling_group.workers.name
}

output "group_arn" {
  description = "ARN of the Auto Scaling group."
  value       = aws_autoscaling_group.workers.arn
}

output "launch_template_id" {
  description = "Launch template of the workers."
  value       = aws_launch_template.workers.id
}

output "log_group" {
  description = "CloudWatch log group of the workers (one stream per instance)."
  value       = aws_cloudwatch_log_group.workers.name
}
